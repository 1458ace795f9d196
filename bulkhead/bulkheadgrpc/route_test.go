package bulkheadgrpc_test

import (
	"context"
	"sync"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// countRate admits everything and counts, per key, what it admitted.
type countRate struct {
	mu sync.Mutex
	n  int
}

func (r *countRate) Admit(context.Context, string, int64) (shaper.Decision, error) {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return shaper.Decision{Allowed: true}, nil
}

func (r *countRate) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestRoutes: which full method names a Layer.Route selects, over real
// calls: exact names, with POST, a service's prefix, wildcards; other
// methods, hosts and a service without its slash select nothing.
func TestRoutes(t *testing.T) {
	methods := []string{emptyCall, unaryCall, streamCall}
	cases := []struct {
		route string
		want  []bool // for methods, in order
	}{
		{"", []bool{true, true, true}},
		{"/", []bool{true, true, true}},
		{emptyCall, []bool{true, false, false}},
		{"POST " + emptyCall, []bool{true, false, false}},
		{"/grpc.testing.TestService/", []bool{true, true, true}},
		{"/grpc.testing.TestService/{method}", []bool{true, true, true}},
		{"/{service}/UnaryCall", []bool{false, true, false}},
		{"/grpc.testing.TestService/{$}", []bool{false, false, false}},
		{"/grpc.testing.TestService", []bool{false, false, false}},
		{"/grpc.testing.Other/", []bool{false, false, false}},
		{"GET " + emptyCall, []bool{false, false, false}},
		{"localhost/grpc.testing.TestService/", []bool{false, false, false}},
	}
	var layers []bulkhead.Layer
	rates := make([]*countRate, len(cases))
	for i, tc := range cases {
		rates[i] = &countRate{}
		layers = append(layers, bulkhead.Layer{Name: "l" + string(rune('a'+i)), Route: tc.route, Rate: rates[i]})
	}
	b := bulkhead.New(bulkhead.Config{Layers: layers})
	exited := make(chan string, 1)
	c := dial(t, serve(t, &service{}, serverConfig{b: b, exited: exited}).addr)
	ctx := as(t.Context(), "acme")
	for j, m := range methods {
		before := make([]int, len(rates))
		for i, r := range rates {
			before[i] = r.count()
		}
		var err error
		switch m {
		case emptyCall:
			_, err = c.EmptyCall(ctx, &testgrpc.Empty{})
		case unaryCall:
			_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		case streamCall:
			var s grpc.ServerStreamingClient[testgrpc.StreamingOutputCallResponse]
			if s, err = c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}); err == nil {
				_, err = recvAll(s)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		<-exited
		for i, tc := range cases {
			if got := rates[i].count() - before[i]; got != map[bool]int{true: 1}[tc.want[j]] {
				t.Errorf("Route %q, %s: layer applied %d times, want %v", tc.route, m, got, tc.want[j])
			}
		}
	}
}

// TestInterceptorOutsideServer: called by hand, outside a gRPC server, the
// interceptor still refuses with the status (there is no trailer to set).
func TestInterceptorOutsideServer(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "l", Rate: okRate{}}}})
	in := bulkheadgrpc.UnaryServerInterceptor(b)
	ran := false
	_, err := in(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: emptyCall}, func(context.Context, any) (any, error) {
		ran = true
		return nil, nil
	})
	if r := refusalOf(t, err, nil); r.reason != "NO_IDENTITY" || ran {
		t.Errorf("no identity: %+v, handler ran %v; want NO_IDENTITY, not run", r, ran)
	}
}
