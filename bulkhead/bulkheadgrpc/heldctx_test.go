package bulkheadgrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

type leaseKey struct{}

// leaseGate is a Gate whose Held carries a context of its own, as
// distsem's carries its lease's (cancelled when the lease is lost).
type leaseGate struct{}

func (leaseGate) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	return floodgate.NewHeld(context.WithValue(ctx, leaseKey{}, "lease"), func(string, int64) {}, "", n), nil
}

func (g leaseGate) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	return g.Hold(ctx, n)
}

// leaseService reports, in its answers, whether its handlers' contexts
// carry the gate's lease.
type leaseService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (leaseService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, leased(ctx)
}

// leased is nil when ctx carries the gate's lease, else an error.
func leased(ctx context.Context) error {
	if v, _ := ctx.Value(leaseKey{}).(string); v != "lease" {
		return errors.New("no lease in the handler's context")
	}
	return nil
}

func (leaseService) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	return leased(ss.Context())
}

// TestHandlerRunsUnderHeldContext: the unary handler's context and the
// stream's Context are the ones the layer's gate gave (a distsem lease's),
// so a lost lease cancels the work.
func TestHandlerRunsUnderHeldContext(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "lease", Gate: leaseGate{}}}})
	c := dial(t, serve(t, leaseService{}, serverConfig{b: b}).addr)
	ctx := as(t.Context(), "acme")
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Errorf("unary handler without the gate's context: %v", err)
	}
	s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(s); err != nil {
		t.Errorf("stream handler without the gate's context: %v", err)
	}
}
