package bulkheadgrpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// attempts records when a server saw each attempt of a call, from an
// interceptor before bulkheadgrpc's, and what it answered.
type attempts struct {
	mu    sync.Mutex
	at    []time.Time
	codes []codes.Code
}

func (a *attempts) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	now := time.Now()
	resp, err := h(ctx, req)
	a.mu.Lock()
	a.at, a.codes = append(a.at, now), append(a.codes, status.Code(err))
	a.mu.Unlock()
	return resp, err
}

func (a *attempts) snapshot() ([]time.Time, []codes.Code) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...), append([]codes.Code(nil), a.codes...)
}

// rateServer serves the test service behind a per-tenant rate lim and an
// attempts recorder.
func rateServer(t *testing.T, lim shaper.Limit) (string, *attempts) {
	t.Helper()
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(lim)},
	}})
	a := &attempts{}
	r := serve(t, &service{}, serverConfig{opts: []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(authUnary, a.unary, bulkheadgrpc.UnaryServerInterceptor(b)),
	}})
	return r.addr, a
}

// TestClientRetriesAfterDelay: the interceptor retries a quota refusal no
// earlier than its delay after it, and the retry is served.
func TestClientRetriesAfterDelay(t *testing.T) {
	const interval = 300 * time.Millisecond
	addr, a := rateServer(t, shaper.Limit{Rate: shaper.Every(interval), Burst: 1})
	c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{})))
	ctx := as(t.Context(), "acme")
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatalf("second call, retried: %v", err)
	}
	at, cs := a.snapshot()
	if len(at) != 3 || cs[1] != codes.ResourceExhausted || cs[2] != codes.OK {
		t.Fatalf("server saw %v; want OK, ResourceExhausted, OK", cs)
	}
	// The retry waited what the meter said: the time since the first
	// admission's, at least the interval.
	if gap := at[2].Sub(at[0]); gap < interval {
		t.Errorf("retry %v after the admitted call, want at least the interval %v", gap, interval)
	}
	if gap := at[2].Sub(at[1]); gap < interval/2 {
		t.Errorf("retry %v after the refusal, want most of the interval %v", gap, interval)
	}
}

// TestClientDoesNotRetry: a delay beyond MaxDelay, a delay past the
// deadline, and codes or answers that are not a delayed refusal, are
// returned at once, after one attempt.
func TestClientDoesNotRetry(t *testing.T) {
	t.Run("beyond MaxDelay", func(t *testing.T) {
		addr, a := rateServer(t, shaper.Limit{Rate: shaper.PerHour(1), Burst: 1})
		c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{MaxDelay: time.Minute})))
		ctx := as(t.Context(), "acme")
		c.EmptyCall(ctx, &testgrpc.Empty{})
		start := time.Now()
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		if status.Code(err) != codes.ResourceExhausted || time.Since(start) > 5*time.Second {
			t.Errorf("got %v after %v; want ResourceExhausted at once", err, time.Since(start))
		}
		if at, _ := a.snapshot(); len(at) != 2 {
			t.Errorf("server saw %d attempts, want 2 (one per call)", len(at))
		}
	})
	t.Run("past the deadline", func(t *testing.T) {
		addr, a := rateServer(t, shaper.Limit{Rate: shaper.Every(5 * time.Second), Burst: 1})
		c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{})))
		ctx := as(t.Context(), "acme")
		c.EmptyCall(ctx, &testgrpc.Empty{})
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.EmptyCall(dctx, &testgrpc.Empty{})
		if status.Code(err) != codes.ResourceExhausted || dctx.Err() != nil {
			t.Errorf("got %v (deadline passed: %v); want ResourceExhausted before the deadline", err, dctx.Err())
		}
		if at, _ := a.snapshot(); len(at) != 2 {
			t.Errorf("server saw %d attempts, want 2", len(at))
		}
	})
	for _, tc := range []struct {
		name     string
		code     codes.Code
		delay    time.Duration // RetryInfo; 0: none
		pushback string        // "": none
	}{
		{"Internal with a delay", codes.Internal, 10 * time.Millisecond, "10"},
		{"Unavailable without a delay", codes.Unavailable, 0, ""},
		{"negative pushback", codes.ResourceExhausted, 10 * time.Millisecond, "-1"},
		{"pushback not a number", codes.Unavailable, 10 * time.Millisecond, "soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, n, _ := refuser(t, tc.code, tc.delay, tc.pushback)
			c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{})))
			_, err := c.EmptyCall(t.Context(), &testgrpc.Empty{})
			if status.Code(err) != tc.code {
				t.Errorf("got %v, want %v", err, tc.code)
			}
			if got := n(); got != 1 {
				t.Errorf("server saw %d attempts, want 1", got)
			}
		})
	}
}

// refuser serves a test service that refuses every call with code, a
// RetryInfo of delay (if positive) and a pushback trailer (if not empty);
// the function returned counts the calls, and first is closed at the first.
func refuser(t *testing.T, code codes.Code, delay time.Duration, pushback string) (addr string, count func() int, first <-chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	seen := make(chan struct{})
	r := serve(t, &service{}, serverConfig{opts: []grpc.ServerOption{grpc.UnaryInterceptor(
		func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
			mu.Lock()
			n++
			if n == 1 {
				close(seen)
			}
			mu.Unlock()
			st := status.New(code, "refused")
			if delay > 0 {
				st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
			}
			if pushback != "" {
				grpc.SetTrailer(ctx, metadata.Pairs(bulkheadgrpc.PushbackKey, pushback))
			}
			return nil, st.Err()
		})}})
	return r.addr, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}, seen
}

// TestClientMaxAttempts: a server that always refuses with a short delay
// sees MaxAttempts attempts, each no earlier than the delay after the one
// before, and the client gets the last refusal.
func TestClientMaxAttempts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		delay    time.Duration
		pushback string
	}{
		{"RetryInfo", 30 * time.Millisecond, ""},
		{"pushback", 0, "30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, n, _ := refuser(t, codes.Unavailable, tc.delay, tc.pushback)
			c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{MaxAttempts: 4})))
			start := time.Now()
			_, err := c.EmptyCall(t.Context(), &testgrpc.Empty{})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want Unavailable", err)
			}
			if got := n(); got != 4 {
				t.Errorf("server saw %d attempts, want 4", got)
			}
			if e := time.Since(start); e < 3*30*time.Millisecond {
				t.Errorf("4 attempts in %v, want at least 3 delays of 30ms", e)
			}
		})
	}
}

// TestClientCancelWhileWaiting: a context cancelled while the interceptor
// waits ends the call at once with Canceled.
func TestClientCancelWhileWaiting(t *testing.T) {
	addr, n, first := refuser(t, codes.ResourceExhausted, 5*time.Second, "")
	c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{})))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		done <- err
	}()
	<-first // the first attempt reached the server
	cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Errorf("got %v, want Canceled", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("call still waiting 3s after its context was cancelled")
	}
	if got := n(); got != 1 {
		t.Errorf("server saw %d attempts, want 1", got)
	}
}

// TestRetryDelay: the delay of each answer, the pushback first.
func TestRetryDelay(t *testing.T) {
	ri := func(code codes.Code, d time.Duration) error {
		st, _ := status.New(code, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		return st.Err()
	}
	pb := func(v ...string) metadata.MD {
		md := metadata.MD{}
		for _, s := range v {
			md.Append(bulkheadgrpc.PushbackKey, s)
		}
		return md
	}
	for _, tc := range []struct {
		err     error
		trailer metadata.MD
		d       time.Duration
		ok      bool
	}{
		{ri(codes.ResourceExhausted, 1500*time.Millisecond), nil, 1500 * time.Millisecond, true},
		{ri(codes.Unavailable, 0), nil, 0, true},
		{ri(codes.Unavailable, time.Second), pb("250"), 250 * time.Millisecond, true},
		{ri(codes.Unavailable, time.Second), pb("-1"), 0, false},
		{ri(codes.Unavailable, time.Second), pb("1", "2"), 0, false},
		{ri(codes.Unavailable, -time.Second), nil, 0, false},
		{status.Error(codes.Unavailable, "x"), pb("7"), 7 * time.Millisecond, true},
		{status.Error(codes.Unavailable, "x"), nil, 0, false},
		{ri(codes.Aborted, time.Second), pb("7"), 0, false},
		{context.Canceled, nil, 0, false},
	} {
		d, ok := bulkheadgrpc.RetryDelay(tc.err, tc.trailer)
		if d != tc.d || ok != tc.ok {
			t.Errorf("RetryDelay(%v, %v) = %v, %v; want %v, %v", tc.err, tc.trailer, d, ok, tc.d, tc.ok)
		}
	}
}

// streamAttempts is attempts for streams.
type streamAttempts struct{ attempts }

func (a *streamAttempts) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	now := time.Now()
	err := h(srv, ss)
	a.mu.Lock()
	a.at, a.codes = append(a.at, now), append(a.codes, status.Code(err))
	a.mu.Unlock()
	return err
}
