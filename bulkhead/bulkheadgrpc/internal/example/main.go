// Command example runs a gRPC health server behind bulkheadgrpc's
// interceptors (a global gate, and a per-tenant quota on Check of 5 calls
// a minute), on ADDR (default 127.0.0.1:50051), and a client that calls it
// through UnaryClientInterceptor with a backoff.Client, as tenant acme,
// twice a second until interrupted: it prints each answer, and the
// refusals the server gives once the quota is spent.
//
//	go run ./internal/example
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:50051"
	}
	if err := run(ctx, addr); err != nil {
		log.Fatal(err)
	}
}

// auth is the example's authentication: every bearer token is a verified
// tenant. A real one verifies a credential.
func auth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) == 1 {
		if tok, ok := strings.CutPrefix(v[0], "Bearer "); ok {
			ctx = bulkhead.WithIdentity(ctx, bulkhead.Identity{Tenant: tok})
		}
	}
	return h(ctx, req)
}

func run(ctx context.Context, addr string) error {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(100, semaphore.Config{}), MaxWait: 100 * time.Millisecond},
		{Name: "check", Route: "/grpc.health.v1.Health/Check", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5})},
	}})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, bulkheadgrpc.UnaryServerInterceptor(b)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.GracefulStop()
		<-served
	}()

	bc := backoff.New(backoff.Config{Name: "health", MaxRetryAfter: time.Second})
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: bc})))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer acme")
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Check(cctx, &healthpb.HealthCheckRequest{})
		switch {
		case ctx.Err() != nil:
			fmt.Println("stopped:", bc.Stats())
			return nil
		case err != nil:
			st := status.Convert(err)
			fmt.Printf("%v: %s\n", st.Code(), st.Message())
		default:
			fmt.Println(resp.Status)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}
