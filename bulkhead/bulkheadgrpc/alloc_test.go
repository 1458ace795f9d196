//go:build !race

package bulkheadgrpc_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// TestInterceptorAllocs: an admitted call through a rate layer and a gate
// layer costs the unary and the stream interceptor no allocation of their
// own (the rate's and the gate's are 0 too).
func TestInterceptorAllocs(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "rate", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1e8), Burst: 1 << 32})},
		{Name: "conc", Gate: semaphore.New(64, semaphore.Config{})},
	}})
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme"})
	resp := &testgrpc.Empty{}
	unary := bulkheadgrpc.UnaryServerInterceptor(b)
	uinfo := &grpc.UnaryServerInfo{FullMethod: emptyCall}
	uh := func(context.Context, any) (any, error) { return resp, nil }
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := unary(ctx, resp, uinfo, uh); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("unary interceptor: %v allocs per call, want 0", n)
	}
	stream := bulkheadgrpc.StreamServerInterceptor(b)
	ss := &ctxStream{ctx: ctx}
	sinfo := &grpc.StreamServerInfo{FullMethod: streamCall}
	sh := func(any, grpc.ServerStream) error { return nil }
	if n := testing.AllocsPerRun(1000, func() {
		if err := stream(nil, ss, sinfo, sh); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("stream interceptor: %v allocs per call, want 0", n)
	}
}
