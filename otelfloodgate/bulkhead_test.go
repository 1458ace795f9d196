package otelfloodgate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/shaper"
)

func TestBulkhead(t *testing.T) {
	m, r := newMetrics(t)
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "export-rate", Route: "POST /export", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2)})},
	}})
	if _, err := m.Bulkhead("api", b); err != nil {
		t.Fatal(err)
	}
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme"})
	req := bulkhead.Request{Method: "POST", Path: "/export"}
	for i := range 3 {
		err := b.Do(ctx, req, func(context.Context) error { return nil })
		if (i < 2) != (err == nil) {
			t.Fatalf("Do #%d = %v", i, err)
		}
	}
	if err := b.Do(context.Background(), req, func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrNoIdentity) {
		t.Fatalf("Do without identity = %v, want ErrNoIdentity", err)
	}
	l := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "api", kind, "bulkhead", "floodgate.layer", "export-rate"}, kv...)...)
	}
	g := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "api", kind, "bulkhead"}, kv...)...)
	}
	diff(t, points(t, r), map[string]int64{
		l(otelfloodgate.NameAdmitted):                           2,
		l(otelfloodgate.NameCanceled):                           0,
		l(otelfloodgate.NameRejected, rsn, "rate"):              1,
		l(otelfloodgate.NameRejected, rsn, "concurrency"):       0,
		l(otelfloodgate.NameRejected, rsn, "store_unavailable"): 0,
		l(otelfloodgate.NameRejected, rsn, "error"):             0,
		l(otelfloodgate.NameInUse):                              0,
		l(otelfloodgate.NameWaiting):                            0,
		g(otelfloodgate.NameRejected, rsn, "no_identity"):       1,
		g(otelfloodgate.NameRejected, rsn, "invalid_key"):       0,
		g(otelfloodgate.NameRejected, rsn, "no_policy"):         0,
	})
}
