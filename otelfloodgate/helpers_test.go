package otelfloodgate_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/otelfloodgate"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// newMetrics returns Metrics on a fresh SDK MeterProvider read by a ManualReader.
func newMetrics(t *testing.T) (*otelfloodgate.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelfloodgate.New(mp)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, r
}

// points collects r and returns every data point as "name{k=v,...}" → value:
// the value of a sum or gauge, the count of a histogram (as "name{...}#count").
// Every point must carry the instrument's documented unit.
func points(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelfloodgate.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelfloodgate.ScopeName)
		}
		for _, m := range sm.Metrics {
			if want := units[m.Name]; m.Unit != want {
				t.Errorf("%s: unit %q, want %q", m.Name, m.Unit, want)
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrString(p.Attributes.ToSlice())] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrString(p.Attributes.ToSlice())] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrString(p.Attributes.ToSlice())+"#count"] = int64(p.Count)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

var units = map[string]string{
	otelfloodgate.NameAdmitted:           "{call}",
	otelfloodgate.NameRejected:           "{call}",
	otelfloodgate.NameCanceled:           "{call}",
	otelfloodgate.NameInUse:              "{weight}",
	otelfloodgate.NameWaiting:            "{call}",
	otelfloodgate.NameLimit:              "{weight}",
	otelfloodgate.NameDecisions:          "{call}",
	otelfloodgate.NameBreakerState:       "1",
	otelfloodgate.NameBreakerTransitions: "{transition}",
	otelfloodgate.NameStoreErrors:        "{call}",
	otelfloodgate.NameLeaseLost:          "{lease}",
	otelfloodgate.NameLeaseRenewals:      "{renewal}",
	otelfloodgate.NameWaitDuration:       "s",
	otelfloodgate.NameHoldDuration:       "s",
	otelfloodgate.NameQueueDelay:         "s",
	otelfloodgate.NameStoreCallDuration:  "s",
}

// attrString is "{k=v,...}" in the SDK's order (sorted by key).
func attrString(kvs []attribute.KeyValue) string {
	pairs := make([]string, len(kvs))
	for i, kv := range kvs {
		pairs[i] = string(kv.Key) + "=" + kv.Value.String()
	}
	slices.Sort(pairs)
	return "{" + strings.Join(pairs, ",") + "}"
}

// diff reports the differences between got and want.
func diff(t *testing.T, got, want map[string]int64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("missing %s (want %d)", k, want[k])
		} else if g != want[k] {
			t.Errorf("%s = %d, want %d", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %d", k, got[k])
		}
	}
}

// key builds a point key: name{floodgate.limiter=...,floodgate.kind=...,extra}
// with the attributes sorted by key, as the SDK does.
func key(name string, kv ...string) string {
	var b strings.Builder
	pairs := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		pairs = append(pairs, kv[i]+"="+kv[i+1])
	}
	slices.Sort(pairs)
	fmt.Fprintf(&b, "%s{%s}", name, strings.Join(pairs, ","))
	return b.String()
}
