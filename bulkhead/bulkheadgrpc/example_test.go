package bulkheadgrpc_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Example: a gRPC server whose calls pass a bulkhead (a global gate, and a
// per-tenant quota of 2 calls an hour on the health service's Check), over
// loopback TCP. The third call of tenant acme is refused with
// ResourceExhausted, RetryInfo and the pushback trailer.
func Example() {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(100, semaphore.Config{}), MaxWait: 100 * time.Millisecond},
		{Name: "check", Route: "/grpc.health.v1.Health/Check", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(2), Burst: 2})},
	}})
	// The authentication interceptor: here every bearer token is a
	// verified tenant.
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) == 1 {
			if tok, ok := strings.CutPrefix(v[0], "Bearer "); ok {
				ctx = bulkhead.WithIdentity(ctx, bulkhead.Identity{Tenant: tok})
			}
		}
		return h(ctx, req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, bulkheadgrpc.UnaryServerInterceptor(b)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(lis)
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer acme")
	for range 3 {
		var trailer metadata.MD
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		if err != nil {
			st := status.Convert(err)
			fmt.Println(st.Code(), st.Message())
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					fmt.Println("RetryInfo:", ri.RetryDelay.AsDuration().Round(time.Minute))
				}
			}
			fmt.Println("pushback trailer set:", len(trailer.Get(bulkheadgrpc.PushbackKey)) == 1)
			continue
		}
		fmt.Println(resp.Status)
	}
	// Output:
	// SERVING
	// SERVING
	// ResourceExhausted Quota exceeded. Retry in 1800s.
	// RetryInfo: 30m0s
	// pushback trailer set: true
}
