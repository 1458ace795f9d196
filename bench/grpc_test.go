package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

type emptyService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (emptyService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

// identify is the authentication interceptor of every gRPC case: a fixed
// verified tenant, as a real auth interceptor would put in the context.
func identify(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(bulkhead.WithIdentity(ctx, bulkhead.Identity{Tenant: "acme", Tier: "gold"}), req)
}

// grpcCases are the server interceptor chains compared: the identity
// interceptor alone (bare); then floodgate's bulkheadgrpc with one rate
// layer (a GCRA meter keyed by tenant) and one gate layer (a semaphore);
// failsafe-go's failsafegrpc with a rate limiter and a bulkhead. Every call
// is admitted.
func grpcCases(b *testing.B) []struct {
	name string
	in   grpc.UnaryServerInterceptor
} {
	// Limits no benchmark run can reach (see BenchmarkBulkhead).
	const rate, burst = 1e8, 1 << 32
	fg := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "rate", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(rate), Burst: burst})},
		{Name: "conc", Gate: semaphore.New(64, semaphore.Config{})},
	}})
	fsRate := ratelimiter.NewBursty[any](rate, time.Second)
	fsBulk := fsbulkhead.New[any](64)
	return []struct {
		name string
		in   grpc.UnaryServerInterceptor
	}{
		{"bare", nil},
		{"floodgate", bulkheadgrpc.UnaryServerInterceptor(fg)},
		{"failsafegrpc", failsafegrpc.NewUnaryServerInterceptor[any](fsRate, failsafe.Policy[any](fsBulk))},
	}
}

// BenchmarkGRPC: per-call cost of a unary call over real loopback TCP (a
// grpc.Server and a grpc.NewClient with insecure credentials), EmptyCall of
// grpc.testing.TestService, behind each interceptor chain of grpcCases: the
// difference to impl=bare is the interceptor's overhead. Allocations are
// the client's and the server's together. Target: impl=floodgate: ns/op ≤
// 1.05× impl=bare (within noise of no interceptor).
func BenchmarkGRPC(b *testing.B) {
	for _, impl := range grpcCases(b) {
		ins := []grpc.UnaryServerInterceptor{identify}
		if impl.in != nil {
			ins = append(ins, impl.in)
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ins...))
		testgrpc.RegisterTestServiceServer(srv, emptyService{})
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.Serve(lis)
		}()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		c := testgrpc.NewTestServiceClient(cc)
		ctx := context.Background()
		run := func(b *testing.B) {
			if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
				b.Fatalf("%s: %v (every call must be admitted)", impl.name, err)
			}
		}
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				run(b)
			}
		})
		b.Run("impl="+impl.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
						b.Errorf("%s: %v (every call must be admitted)", impl.name, err)
						return
					}
				}
			})
		})
		cc.Close()
		srv.Stop()
		<-done
	}
}

// BenchmarkGRPCInterceptor: the server interceptor alone, called as gRPC
// calls it, with no network: its own time and allocations per admitted call.
// Target: impl=floodgate: allocs/op = 0.
func BenchmarkGRPCInterceptor(b *testing.B) {
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/EmptyCall"}
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme", Tier: "gold"})
	resp := &testgrpc.Empty{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	for _, impl := range grpcCases(b) {
		in := impl.in
		if in == nil {
			in = func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				return h(ctx, req)
			}
		}
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := in(ctx, resp, info, handler); err != nil {
					b.Fatalf("%s: %v", impl.name, err)
				}
			}
		})
	}
}
