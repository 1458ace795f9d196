package bulkheadgrpc_test

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// retryPolicy is a service config whose retry policy, left to itself,
// would spend its 3 attempts within about 20ms (10ms backoffs): only the
// server's pushback makes it wait longer.
const retryPolicy = `{"methodConfig": [{
	"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.01s",
		"maxBackoff": "0.01s",
		"backoffMultiplier": 1,
		"retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
	}
}]}`

// TestGRPCRetryPolicyHonoursPushback: gRPC's own retry (a service config's
// retryPolicy, no interceptor of ours on the client) waits the pushback
// the refusal carries, for a unary call and for a stream, and the retry is
// served; with its own 10ms backoff alone its attempts would all be
// refused.
func TestGRPCRetryPolicyHonoursPushback(t *testing.T) {
	const interval = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		call func(testgrpc.TestServiceClient, *testing.T) error
	}{
		{"unary", func(c testgrpc.TestServiceClient, t *testing.T) error {
			_, err := c.EmptyCall(as(t.Context(), "acme"), &testgrpc.Empty{})
			return err
		}},
		{"stream", func(c testgrpc.TestServiceClient, t *testing.T) error {
			s, err := c.StreamingOutputCall(as(t.Context(), "acme"), &testgrpc.StreamingOutputCallRequest{
				ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}})
			if err != nil {
				return err
			}
			msgs, err := recvAll(s)
			if err == nil && len(msgs) != 1 {
				t.Errorf("%d messages, want 1", len(msgs))
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
				{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.Every(interval), Burst: 1})},
			}})
			a := &attempts{}
			as := &streamAttempts{}
			r := serve(t, &service{}, serverConfig{opts: []grpc.ServerOption{
				grpc.ChainUnaryInterceptor(authUnary, a.unary, bulkheadgrpc.UnaryServerInterceptor(b)),
				grpc.ChainStreamInterceptor(authStream, as.stream, bulkheadgrpc.StreamServerInterceptor(b)),
			}})
			c := dial(t, r.addr, grpc.WithDefaultServiceConfig(retryPolicy))
			if err := tc.call(c, t); err != nil {
				t.Fatalf("first call: %v", err)
			}
			if err := tc.call(c, t); err != nil {
				t.Fatalf("second call, retried by gRPC after the pushback: %v", err)
			}
			at, cs := a.snapshot()
			if tc.name == "stream" {
				at, cs = as.snapshot()
			}
			if len(at) != 3 || cs[0] != codes.OK || cs[1] != codes.ResourceExhausted || cs[2] != codes.OK {
				t.Fatalf("server saw %v; want OK, ResourceExhausted, OK", cs)
			}
			if gap := at[2].Sub(at[0]); gap < interval {
				t.Errorf("gRPC retried %v after the admitted call, want at least the interval %v", gap, interval)
			}
			if gap := at[2].Sub(at[1]); gap < interval/2 {
				t.Errorf("gRPC retried %v after the refusal, want most of the interval %v", gap, interval)
			}
		})
	}
}
