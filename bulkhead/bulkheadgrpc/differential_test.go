package bulkheadgrpc_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// outcome is everything a client sees of a call.
type outcome struct {
	msgs    [][]byte // the responses, marshaled deterministically
	status  []byte   // the final status, as a google.rpc.Status
	header  metadata.MD
	trailer metadata.MD
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diffCalls are the calls of the differential test, each run against a
// client as tenant acme.
var diffCalls = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome
}{
	{"EmptyCall", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		resp, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&o.header), grpc.Trailer(&o.trailer))
		return o.unary(t, resp, err)
	}},
	{"UnaryCall payload", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 3, Payload: &testgrpc.Payload{Body: []byte("abc")}},
			grpc.Header(&o.header), grpc.Trailer(&o.trailer))
		return o.unary(t, resp, err)
	}},
	{"UnaryCall handler error", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.ResourceExhausted), Message: "the handler's own"}},
			grpc.Header(&o.header), grpc.Trailer(&o.trailer))
		return o.unary(t, resp, err)
	}},
	{"UnimplementedCall", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		resp, err := c.UnimplementedCall(ctx, &testgrpc.Empty{}, grpc.Header(&o.header), grpc.Trailer(&o.trailer))
		return o.unary(t, resp, err)
	}},
	{"StreamingOutputCall", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 10}, {Size: 100}}})
		if err != nil {
			t.Fatal(err)
		}
		return streamOutcome(t, s)
	}},
	{"StreamingOutputCall handler error", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: 2}},
			ResponseStatus:     &testgrpc.EchoStatus{Code: int32(codes.Unavailable), Message: "gone"}})
		if err != nil {
			t.Fatal(err)
		}
		return streamOutcome(t, s)
	}},
	{"FullDuplexCall", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var o outcome
		for _, body := range []string{"one", "two"} {
			if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(body)}}); err != nil {
				t.Fatal(err)
			}
			m, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			o.msgs = append(o.msgs, marshal(t, m))
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if !errors.Is(err, io.EOF) {
			o.status = marshal(t, status.Convert(err).Proto())
		}
		o.header, _ = s.Header()
		o.trailer = s.Trailer()
		return o
	}},
	{"unknown service", func(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) outcome {
		// A service the server does not have: no handler, and no
		// interceptor runs.
		var o outcome
		resp, err := healthpb.NewHealthClient(c.(conner).conn()).Check(ctx, &healthpb.HealthCheckRequest{},
			grpc.Header(&o.header), grpc.Trailer(&o.trailer))
		return o.unary(t, resp, err)
	}},
}

func (o outcome) unary(t *testing.T, resp proto.Message, err error) outcome {
	t.Helper()
	if err != nil {
		o.status = marshal(t, status.Convert(err).Proto())
	} else {
		o.msgs = [][]byte{marshal(t, resp)}
	}
	return o
}

func streamOutcome[T any](t *testing.T, s grpc.ServerStreamingClient[T]) outcome {
	t.Helper()
	var o outcome
	msgs, err := recvAll(s)
	for _, m := range msgs {
		o.msgs = append(o.msgs, marshal(t, any(m).(proto.Message)))
	}
	if err != nil {
		o.status = marshal(t, status.Convert(err).Proto())
	}
	o.header, _ = s.Header()
	o.trailer = s.Trailer()
	return o
}

// TestDifferential: a server with bulkheadgrpc's interceptors and no layers
// answers every call exactly as the bare server does: the same responses,
// statuses (handler errors and their details included), headers and
// trailers.
//
// The same with layers that admit every call (a per-tenant rate and a gate
// far from full: the handler runs under the gate's held context and, for
// streams, through the interceptor's stream wrapper), and through the
// client interceptor (alone and on a backoff.Client) against the bare
// server: a call that is not refused is not changed.
func TestDifferential(t *testing.T) {
	addr := serve(t, &service{}, serverConfig{}).addr
	bare := connClient(t, addr)
	admitting := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1e6), Burst: 1e6})},
		{Name: "global", Gate: semaphore.New(1000, semaphore.Config{})},
	}})
	clientOnly := bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{})
	onBackoff := bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: backoff.New(backoff.Config{})})
	wrapped := []struct {
		name string
		c    testgrpc.TestServiceClient
	}{
		{"no layers", connClient(t, serve(t, &service{}, serverConfig{b: bulkhead.New(bulkhead.Config{})}).addr)},
		{"admitting layers", connClient(t, serve(t, &service{}, serverConfig{b: admitting}).addr)},
		{"client interceptor", connClient(t, addr, grpc.WithUnaryInterceptor(clientOnly))},
		{"client on a backoff.Client", connClient(t, addr, grpc.WithUnaryInterceptor(onBackoff))},
	}
	ctx := as(t.Context(), "acme")
	for _, w := range wrapped {
		for _, tc := range diffCalls {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				want := tc.run(t, ctx, bare)
				got := tc.run(t, ctx, w.c)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n%+v\nbare:\n%+v", w.name, got, want)
				}
				if want.msgs == nil && want.status == nil {
					t.Errorf("the bare server's answer is empty: the call did not run")
				}
			})
		}
	}
	if st := admitting.Stats().Layers; st[0].Admitted == 0 || st[1].Admitted != st[0].Admitted || st[1].InFlight != 0 {
		t.Errorf("admitting layers: %+v", st)
	}
}

// conner is a TestServiceClient that also gives its connection.
type conner interface{ conn() *grpc.ClientConn }

type connTestClient struct {
	testgrpc.TestServiceClient
	cc *grpc.ClientConn
}

func (c connTestClient) conn() *grpc.ClientConn { return c.cc }

func connClient(t *testing.T, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return connTestClient{testgrpc.NewTestServiceClient(cc), cc}
}
