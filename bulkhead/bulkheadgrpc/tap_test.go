package bulkheadgrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
)

// TestTapHandle: the tap refuses a peer over its rate before any
// interceptor or handler runs, with ResourceExhausted and RetryInfo (and,
// as gRPC writes a tap's refusal, no pushback trailer), for unary calls and
// streams alike.
func TestTapHandle(t *testing.T) {
	tb := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "peer", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(3), Burst: 3})},
	}})
	a := &attempts{}
	svc := &service{}
	r := serve(t, svc, serverConfig{opts: []grpc.ServerOption{
		grpc.InTapHandle(bulkheadgrpc.TapHandle(tb, bulkheadgrpc.TapConfig{})),
		grpc.ChainUnaryInterceptor(a.unary),
	}})
	c := dial(t, r.addr)
	ctx := t.Context()
	for i := range 2 {
		if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(s); err != nil {
		t.Fatalf("stream, the third call: %v", err)
	}
	var tr metadata.MD
	_, err = c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Trailer(&tr))
	ref := refusalOf(t, err, tr)
	if ref.code != codes.ResourceExhausted || ref.reason != "LIMITED" || ref.delay <= 15*time.Second || ref.delay > 20*time.Second || !strings.HasPrefix(ref.msg, "Quota exceeded. Retry in ") {
		t.Errorf("fourth call: %+v; want ResourceExhausted, LIMITED, a delay in (15s, 20s]", ref)
	}
	if len(ref.pushback) != 0 {
		t.Errorf("pushback %q on a tap's refusal", ref.pushback)
	}
	s, err = c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(s); refusalOf(t, err, s.Trailer()).code != codes.ResourceExhausted {
		t.Errorf("stream over the rate: %v, want ResourceExhausted", err)
	}
	if at, _ := a.snapshot(); len(at) != 2 || svc.calls.Load() != 3 {
		t.Errorf("interceptor saw %d unary calls, handlers ran %d times; want 2 and 3", len(at), svc.calls.Load())
	}
	peer := "peer:127.0.0.1"
	if ls := layerStats(t, tb, "peer"); ls.Limited != 2 || ls.Admitted != 3 {
		t.Errorf("tap stats %+v, want 3 admitted, 2 limited (key %s)", ls, peer)
	}
}

// TestTapIdentity: TapConfig.Identity keys the tap's layers (here by a
// tenant header), and a call it does not identify passes unchecked.
func TestTapIdentity(t *testing.T) {
	tb := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1), Burst: 1})},
	}})
	ident := func(_ context.Context, info *tap.Info) (bulkhead.Identity, bool) {
		tok, ok := strings.CutPrefix(first(info.Header, "authorization"), "Bearer ")
		return bulkhead.Identity{Tenant: tok}, ok
	}
	r := serve(t, &service{}, serverConfig{opts: []grpc.ServerOption{
		grpc.InTapHandle(bulkheadgrpc.TapHandle(tb, bulkheadgrpc.TapConfig{Identity: ident})),
	}})
	c := dial(t, r.addr)
	for _, step := range []struct {
		tenant string
		code   codes.Code
	}{
		{"acme", codes.OK}, {"acme", codes.ResourceExhausted}, {"globex", codes.OK}, {"", codes.OK}, {"", codes.OK},
	} {
		ctx := t.Context()
		if step.tenant != "" {
			ctx = as(ctx, step.tenant)
		}
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		if got := refusalOf(t, err, nil).code; err != nil && got != step.code || err == nil && step.code != codes.OK {
			t.Errorf("tenant %q: %v, want %v", step.tenant, err, step.code)
		}
	}
}
