package otelfloodgate_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/otelfloodgate"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// newMetrics returns Metrics on a fresh SDK MeterProvider read by a ManualReader.
func newMetrics(t testing.TB) (*otelfloodgate.Metrics, *sdkmetric.ManualReader) {
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

// collect returns r's data, checking the scope and every instrument's unit.
func collect(t testing.TB, r *sdkmetric.ManualReader) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelfloodgate.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelfloodgate.ScopeName)
		}
		for _, m := range sm.Metrics {
			if want, ok := units[m.Name]; !ok || m.Unit != want {
				t.Errorf("%s: unit %q, want %q (documented: %v)", m.Name, m.Unit, want, ok)
			}
			out = append(out, m)
		}
	}
	return out
}

// points collects r and returns every data point as "name{k=v,...}" → value:
// the value of a sum or an integer gauge; for a float gauge (a duration in
// seconds), its value in microseconds as "name{...}#us"; for a histogram,
// its count as "name{...}#count" and its sum in milliseconds as
// "name{...}#ms".
// The limiter attribute is left out of the key (it is checked to be there).
func points(t testing.TB, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	add := func(name string, s attribute.Set, suffix string, v int64) {
		if _, ok := s.Value(otelfloodgate.KeyLimiter); !ok {
			t.Errorf("%s: a point without %s: %v", name, otelfloodgate.KeyLimiter, s.ToSlice())
		}
		out[name+attrString(s)+suffix] = v
	}
	for _, m := range collect(t, r) {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				add(m.Name, p.Attributes, "", p.Value)
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				add(m.Name, p.Attributes, "", p.Value)
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				add(m.Name, p.Attributes, "#us", int64(p.Value*1e6+0.5))
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				add(m.Name, p.Attributes, "#count", int64(p.Count))
				add(m.Name, p.Attributes, "#ms", int64(p.Sum*1000+0.5))
			}
		default:
			t.Errorf("%s: unexpected data %T", m.Name, m.Data)
		}
	}
	return out
}

// attrString renders s without the limiter: {component=semaphore,reason=queue_full}
// (keys without their floodgate. prefix, sorted).
func attrString(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		if a.Key == otelfloodgate.KeyLimiter {
			continue
		}
		kv = append(kv, strings.TrimPrefix(string(a.Key), "floodgate.")+"="+a.Value.String())
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// units are the documented units of every instrument.
var units = map[string]string{
	otelfloodgate.NameAdmitted:           "{call}",
	otelfloodgate.NameRejected:           "{call}",
	otelfloodgate.NameCanceled:           "{call}",
	otelfloodgate.NameInUse:              "{weight}",
	otelfloodgate.NameWaitDuration:       "s",
	otelfloodgate.NameHoldDuration:       "s",
	otelfloodgate.NameDecisions:          "{call}",
	otelfloodgate.NameStoreCallDuration:  "s",
	otelfloodgate.NameBreakerState:       "1",
	otelfloodgate.NameBreakerTransitions: "{transition}",
	otelfloodgate.NameLeaseLost:          "{lease}",
	otelfloodgate.NameLeaseRenewals:      "{renewal}",
	otelfloodgate.NameLimit:              "{weight}",
	otelfloodgate.NameLatencyBaseline:    "s",
}

// diff reports each point of want that got lacks or has another value, and
// each point of got that want does not list.
// The attributes of want's keys may come in any order.
func diff(t *testing.T, got, want map[string]int64) {
	t.Helper()
	want = sortedKeys(want)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %d (present: %v), want %d", k, g, ok, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected point %s = %d", k, v)
		}
	}
}

func sumPoints(m metricdata.Metrics) []metricdata.DataPoint[int64] {
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		return s.DataPoints
	}
	return nil
}

// sortedKeys returns points with the attributes of each key sorted.
func sortedKeys(points map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(points))
	for k, v := range points {
		name, rest, ok := strings.Cut(k, "{")
		attrs, suffix, ok2 := strings.Cut(rest, "}")
		if !ok || !ok2 {
			out[k] = v
			continue
		}
		kv := strings.Split(attrs, ",")
		slices.Sort(kv)
		out[name+"{"+strings.Join(kv, ",")+"}"+suffix] = v
	}
	return out
}
