package bulkheadgrpc_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestQuotaResourceExhausted: a tenant over its own rate gets
// ResourceExhausted with the public message, ErrorInfo LIMITED, RetryInfo
// and the pushback trailer, all carrying the meter's delay; another tenant
// is unaffected, and the refused call never reached the handler.
func TestQuotaResourceExhausted(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2), Burst: 2})},
	}})
	svc := &service{}
	c := dial(t, serve(t, svc, serverConfig{b: b}).addr)
	ctx := as(t.Context(), "acme")
	for i := range 2 {
		if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	var hdr, tr metadata.MD
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&hdr), grpc.Trailer(&tr))
	r := refusalOf(t, err, tr)
	if r.code != codes.ResourceExhausted || r.reason != "LIMITED" {
		t.Fatalf("third call: %+v, want ResourceExhausted, LIMITED", r)
	}
	// PerMinute(2): the next unit is 30s away, less what the calls took.
	if r.delay <= 25*time.Second || r.delay > 30*time.Second {
		t.Errorf("RetryInfo delay %v, want in (25s, 30s]", r.delay)
	}
	want := "Quota exceeded. Retry in " + strconv.FormatInt(int64((r.delay+time.Second-1)/time.Second), 10) + "s."
	if r.msg != want {
		t.Errorf("message %q, want %q", r.msg, want)
	}
	wantMs := strconv.FormatInt(int64((r.delay+time.Millisecond-1)/time.Millisecond), 10)
	if len(r.pushback) != 1 || r.pushback[0] != wantMs {
		t.Errorf("pushback trailer %q, want [%s] (RetryInfo %v in ms, rounded up)", r.pushback, wantMs, r.delay)
	}
	if len(hdr) != 0 {
		t.Errorf("refusal sent headers %v: it must be trailers-only, for gRPC's retry", hdr)
	}
	if svc.calls.Load() != 2 {
		t.Errorf("handler ran %d times, want 2", svc.calls.Load())
	}
	if _, err := c.EmptyCall(as(t.Context(), "globex"), &testgrpc.Empty{}); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	if ls := layerStats(t, b, "tenant"); ls.Limited != 1 || ls.Admitted != 3 {
		t.Errorf("stats %+v, want 1 limited, 3 admitted", ls)
	}
}

// TestGlobalSaturationUnavailable: a full global gate (no key) refuses with
// Unavailable, RetryInfo and pushback; the gate is held while the handler
// runs, and the next call after it returns is served.
func TestGlobalSaturationUnavailable(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(1, semaphore.Config{}), MaxWait: -1, RetryAfter: 1500 * time.Millisecond},
	}})
	svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 1)}
	exited := make(chan string, 1)
	c := dial(t, serve(t, svc, serverConfig{b: b, exited: exited}).addr)
	ctx := as(t.Context(), "acme")
	first := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		first <- err
	}()
	<-svc.entered
	var tr metadata.MD
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Trailer(&tr))
	<-exited
	r := refusalOf(t, err, tr)
	if r.code != codes.Unavailable || r.reason != "NO_CAPACITY" || r.msg != "Service temporarily unavailable. Retry in 2s." {
		t.Errorf("second call: %+v, want Unavailable, NO_CAPACITY, the public message", r)
	}
	if r.delay != 1500*time.Millisecond || len(r.pushback) != 1 || r.pushback[0] != "1500" {
		t.Errorf("delay %v, pushback %q; want 1.5s, [1500]", r.delay, r.pushback)
	}
	if ls := layerStats(t, b, "global"); ls.InFlight != 1 {
		t.Errorf("InFlight %d while the first call runs, want 1", ls.InFlight)
	}
	close(svc.release)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	<-exited
	if ls := layerStats(t, b, "global"); ls.InFlight != 0 {
		t.Errorf("InFlight %d after the call, want 0", ls.InFlight)
	}
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Errorf("call after the first ended: %v", err)
	}
}

// TestStreamHoldsPermit: a server stream holds its gate for its whole life:
// a second stream is refused while the first is open, even after the first
// has sent all its messages, and admitted once it has ended.
func TestStreamHoldsPermit(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "streams", Route: streamCall, Key: bulkhead.ByTenant, KeyedGate: semaphore.NewKeyed(1, semaphore.KeyedConfig{}), MaxWait: -1},
	}})
	svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 2)}
	exited := make(chan string, 2)
	c := dial(t, serve(t, svc, serverConfig{b: b, exited: exited}).addr)
	ctx := as(t.Context(), "acme")
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 3}, {Size: 5}}}

	s1, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := s1.Recv(); err != nil {
			t.Fatalf("stream 1, message %d: %v", i, err)
		}
	}
	<-svc.entered
	// A deadline, so that a stream wrongly admitted (and held) ends too.
	ctx2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	s2, err := c.StreamingOutputCall(ctx2, req)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := recvAll(s2)
	<-exited
	r := refusalOf(t, err, s2.Trailer())
	if len(msgs) != 0 || r.code != codes.ResourceExhausted || r.reason != "NO_CAPACITY" || len(r.pushback) != 1 {
		t.Errorf("stream 2 while stream 1 is open: %d messages, %+v; want none, ResourceExhausted, NO_CAPACITY, a pushback", len(msgs), r)
	}
	// Another tenant's stream is not held back by acme's.
	gctx, gcancel := context.WithCancel(as(t.Context(), "globex"))
	g, err := c.StreamingOutputCall(gctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recv(); err != nil {
		t.Errorf("globex's stream while acme's is open: %v", err)
	}
	gcancel()
	<-exited

	close(svc.release)
	if _, err := recvAll(s1); err != nil {
		t.Fatalf("stream 1 end: %v", err)
	}
	<-exited
	if ls := layerStats(t, b, "streams"); ls.InFlight != 0 {
		t.Errorf("InFlight %d after stream 1 ended, want 0", ls.InFlight)
	}
	s3, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err = recvAll(s3)
	<-exited
	if err != nil || len(msgs) != 2 {
		t.Errorf("stream 3, after stream 1 ended: %d messages, %v; want 2, nil", len(msgs), err)
	}
}

// TestCancelReturnsPermit: a client that cancels mid-stream ends the
// server's handler, and its gate goes back: InFlight 0, the next stream is
// admitted.
func TestCancelReturnsPermit(t *testing.T) {
	gate := semaphore.New(1, semaphore.Config{})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: gate, MaxWait: -1},
	}})
	svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 2)}
	exited := make(chan string, 2)
	c := dial(t, serve(t, svc, serverConfig{b: b, exited: exited}).addr)
	ctx, cancel := context.WithCancel(as(t.Context(), "acme"))
	s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	<-svc.entered
	if ls := layerStats(t, b, "global"); ls.InFlight != 1 {
		t.Fatalf("InFlight %d mid-stream, want 1", ls.InFlight)
	}
	cancel()
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("Recv after cancel: %v, want Canceled", err)
	}
	<-exited
	if ls := layerStats(t, b, "global"); ls.InFlight != 0 || ls.Admitted != 1 {
		t.Errorf("after cancel: %+v, want InFlight 0, 1 admitted", ls)
	}
	// The gate itself is free: TryHold succeeds.
	h, err := gate.TryHold(t.Context(), 1)
	if err != nil {
		t.Fatalf("gate after cancel: %v", err)
	}
	h.Release()
}

// TestCancelWhileWaiting: a call waiting for a full gate whose client
// cancels leaves nothing held and never reaches its handler.
func TestCancelWhileWaiting(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(1, semaphore.Config{})},
	}})
	svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 2)}
	exited := make(chan string, 2)
	c := dial(t, serve(t, svc, serverConfig{b: b, exited: exited}).addr)
	first := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(as(t.Context(), "acme"), &testgrpc.Empty{})
		first <- err
	}()
	<-svc.entered
	ctx, cancel := context.WithTimeout(as(t.Context(), "acme"), 200*time.Millisecond)
	defer cancel()
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("waiting call: %v, want DeadlineExceeded", err)
	}
	<-exited
	if ls := layerStats(t, b, "global"); ls.InFlight != 1 || ls.Canceled != 1 {
		t.Errorf("stats %+v, want 1 in flight (the first call), 1 canceled", ls)
	}
	close(svc.release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	<-exited
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestRefusalStatuses: each kind of refusal has its code and public message,
// and never the error's text.
func TestRefusalStatuses(t *testing.T) {
	secret := errors.New("redis at 10.1.2.3:6379: auth failed")
	cases := []struct {
		name   string
		layer  bulkhead.Layer
		tenant string
		code   codes.Code
		msg    string
		reason string
	}{
		{"no identity", bulkhead.Layer{Name: "l", Rate: okRate{}}, "", codes.Unauthenticated, "Authentication required.", "NO_IDENTITY"},
		{"no policy", bulkhead.Layer{Name: "l", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"gold": okRate{}}}, "acme", codes.PermissionDenied, "No quota for this client.", "NO_POLICY"},
		{"leaf error", bulkhead.Layer{Name: "l", Rate: errRate{secret}}, "acme", codes.Internal, "Internal server error.", "ERROR"},
		{"status 503 on a keyed rate", bulkhead.Layer{Name: "l", Key: bulkhead.ByTenant, Status: 503,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1), Burst: 1})}, "acme", codes.Unavailable, "Service temporarily unavailable. Retry in 3600s.", "LIMITED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{tc.layer}})
			c := dial(t, serve(t, &service{}, serverConfig{b: b}).addr)
			ctx := t.Context()
			if tc.tenant != "" {
				ctx = as(ctx, tc.tenant)
			}
			var err error
			for range 2 { // the second, for a rate of one
				if _, err = c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
					break
				}
			}
			r := refusalOf(t, err, nil)
			if tc.code == codes.Unavailable && r.delay > 0 {
				// PerHour(1): the message's seconds follow the delay.
				tc.msg = "Service temporarily unavailable. Retry in " + strconv.FormatInt(int64((r.delay+time.Second-1)/time.Second), 10) + "s."
			}
			if r.code != tc.code || r.msg != tc.msg || r.reason != tc.reason {
				t.Errorf("got %+v; want %v %q %s", r, tc.code, tc.msg, tc.reason)
			}
			if strings.Contains(status.Convert(err).String(), "10.1.2.3") || strings.Contains(r.msg, "bulkhead") {
				t.Errorf("status %v carries the error's text", status.Convert(err))
			}
		})
	}
}

type okRate struct{}

func (okRate) Admit(context.Context, string, int64) (shaper.Decision, error) {
	return shaper.Decision{Allowed: true}, nil
}

type errRate struct{ err error }

func (r errRate) Admit(context.Context, string, int64) (shaper.Decision, error) {
	return shaper.Decision{}, r.err
}

// TestShedUnavailable: a layer's criticality classes shed the sheddable
// call with Unavailable, SHED and a delay while a critical call holds the
// gate.
func TestShedUnavailable(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(1, semaphore.Config{}), Classes: []bulkhead.Criticality{
			{Name: "critical"}, {Name: "sheddable", MaxWait: -1},
		}},
	}})
	svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 1)}
	exited := make(chan string, 2)
	c := dial(t, serve(t, svc, serverConfig{b: b, exited: exited}).addr)
	first := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(metadata.AppendToOutgoingContext(as(t.Context(), "acme"), "x-class", "critical"), &testgrpc.Empty{})
		first <- err
	}()
	<-svc.entered
	var tr metadata.MD
	_, err := c.EmptyCall(metadata.AppendToOutgoingContext(as(t.Context(), "acme"), "x-class", "sheddable"), &testgrpc.Empty{}, grpc.Trailer(&tr))
	<-exited
	r := refusalOf(t, err, tr)
	if r.code != codes.Unavailable || r.reason != "SHED" || r.delay <= 0 || len(r.pushback) != 1 {
		t.Errorf("sheddable call: %+v, want Unavailable, SHED, a delay and a pushback", r)
	}
	close(svc.release)
	if err := <-first; err != nil {
		t.Errorf("critical call: %v", err)
	}
	<-exited
}
