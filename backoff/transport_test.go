package backoff_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/internal/observetest"
)

// refusingServer answers 503 with retryAfter (none if "") to the first
// refuse requests, then 200 with the request's body; it records when each
// request came and its body.
type refusingServer struct {
	*httptest.Server
	refuse     int
	retryAfter string

	mu     sync.Mutex
	at     []time.Time
	bodies []string
}

func newRefusingServer(t *testing.T, refuse int, retryAfter string) *refusingServer {
	s := &refusingServer{refuse: refuse, retryAfter: retryAfter}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.bodies = append(s.bodies, string(b))
		n := len(s.at)
		s.mu.Unlock()
		if n <= s.refuse {
			if s.retryAfter != "" {
				w.Header().Set("Retry-After", s.retryAfter)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy "+strconv.Itoa(n))
			return
		}
		io.WriteString(w, "ok "+string(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *refusingServer) requests() ([]time.Time, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...), append([]string(nil), s.bodies...)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTransportRetryAfter: a 503 with Retry-After: 1 is retried no earlier
// than a second later, over a real HTTP server.
func TestTransportRetryAfter(t *testing.T) {
	s := newRefusingServer(t, 1, "1")
	hc := &http.Client{Transport: &backoff.Transport{Client: backoff.New(backoff.Config{})}}
	resp, err := hc.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "ok " {
		t.Errorf("GET = %d %q, want 200 %q", resp.StatusCode, body, "ok ")
	}
	at, _ := s.requests()
	if len(at) != 2 {
		t.Fatalf("%d requests, want 2", len(at))
	}
	if d := at[1].Sub(at[0]); d < time.Second || d > 3*time.Second {
		t.Errorf("retried after %v, want 1 s (at most a tenth more, and the network)", d)
	}
}

// TestTransportRefusalReturned: a Retry-After beyond MaxRetryAfter, or
// past the deadline, returns the 503 at once and as it came; so do a
// request that cannot be sent again and a spent MaxAttempts.
func TestTransportRefusalReturned(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		timeout    time.Duration
		cfg        backoff.Config
		req        func(url string) *http.Request
		attempts   int
	}{
		{"beyond MaxRetryAfter", "60", 0, backoff.Config{}, get, 1},
		{"HTTP-date beyond MaxRetryAfter", time.Now().Add(time.Minute).UTC().Format(http.TimeFormat), 0, backoff.Config{}, get, 1},
		{"beyond deadline", "2", time.Second, backoff.Config{}, get, 1},
		{"POST", "0", 0, backoff.Config{}, func(url string) *http.Request {
			r, _ := http.NewRequest("POST", url, strings.NewReader("x"))
			return r
		}, 1},
		{"body without GetBody", "0", 0, backoff.Config{}, func(url string) *http.Request {
			r, _ := http.NewRequest("PUT", url, io.NopCloser(strings.NewReader("x")))
			return r
		}, 1},
		{"MaxAttempts", "0", 0, backoff.Config{MaxAttempts: 2}, get, 2},
		{"GetBody fails", "0", 0, backoff.Config{}, func(url string) *http.Request {
			r, _ := http.NewRequest("PUT", url, strings.NewReader("x"))
			r.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
			return r
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRefusingServer(t, 100, tc.retryAfter)
			req := tc.req(s.URL)
			if tc.timeout > 0 {
				ctx, cancel := context.WithTimeout(req.Context(), tc.timeout)
				defer cancel()
				req = req.WithContext(ctx)
			}
			c := backoff.New(tc.cfg)
			start := time.Now()
			resp, err := (&backoff.Transport{Client: c}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			body := readAll(t, resp)
			want := "busy " + strconv.Itoa(tc.attempts)
			if resp.StatusCode != 503 || body != want || resp.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("RoundTrip = %d %q Retry-After %q, want 503 %q Retry-After %q",
					resp.StatusCode, body, resp.Header.Get("Retry-After"), want, tc.retryAfter)
			}
			if at, _ := s.requests(); len(at) != tc.attempts {
				t.Errorf("%d requests, want %d", len(at), tc.attempts)
			}
			if tc.attempts == 1 && took > 500*time.Millisecond {
				t.Errorf("returned after %v, want at once", took)
			}
			if st := c.Stats(); st.Refused != int64(tc.attempts) || st.Attempts != int64(tc.attempts) {
				t.Errorf("Stats() = %+v, want %d attempts refused", st, tc.attempts)
			}
		})
	}
}

func get(url string) *http.Request {
	r, _ := http.NewRequest("GET", url, nil)
	return r
}

// TestTransportReplaysBody: a POST with an Idempotency-Key and GetBody is
// retried with the same body.
func TestTransportReplaysBody(t *testing.T) {
	for _, key := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		s := newRefusingServer(t, 2, "0")
		req, _ := http.NewRequest("POST", s.URL, strings.NewReader("payload"))
		req.Header.Set(key, "k1")
		resp, err := (&backoff.Transport{Client: backoff.New(backoff.Config{})}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != 200 || body != "ok payload" {
			t.Errorf("%s: POST = %d %q, want 200 %q", key, resp.StatusCode, body, "ok payload")
		}
		if _, bodies := s.requests(); len(bodies) != 3 || bodies[0] != "payload" || bodies[2] != "payload" {
			t.Errorf("%s: the server got %q, want the payload 3 times", key, bodies)
		}
	}
}

// closeTracker is a response body that records being read and closed.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeTracker) Close() error { b.closed.Store(true); return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportDrainsRefusals: each refused response that is retried is
// read (at most 4 KiB) and closed; the returned one is untouched.
func TestTransportDrainsRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []*closeTracker
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b := &closeTracker{Reader: strings.NewReader(strings.Repeat("x", 10<<10))}
			bodies = append(bodies, b)
			h := http.Header{"Retry-After": {"1"}}
			return &http.Response{StatusCode: 429, Header: h, Body: b, Request: r}, nil
		})
		c := backoff.New(backoff.Config{})
		req, _ := http.NewRequest("GET", "http://downstream.test/", nil)
		resp, err := (&backoff.Transport{Base: base, Client: c}).RoundTrip(req)
		if err != nil || len(bodies) != 3 || resp.Body != bodies[2] {
			t.Fatalf("RoundTrip = %v, %v after %d attempts, want the third response", resp, err, len(bodies))
		}
		for i, b := range bodies[:2] {
			left, _ := io.Copy(io.Discard, b.Reader)
			if !b.closed.Load() || left != 6<<10 {
				t.Errorf("refusal %d: closed %v, %d bytes left unread; want closed after 4 KiB", i+1, b.closed.Load(), left)
			}
		}
		if bodies[2].closed.Load() {
			t.Error("the returned response's body was closed")
		}
	})
}

// TestTransportThrottled: a throttled request is not sent, its body is
// closed, and the error matches ErrThrottled through http.Client's
// *url.Error.
func TestTransportThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec observetest.Recorder
		sent := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent++
			if r.Body != nil {
				r.Body.Close()
			}
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		c := backoff.New(backoff.Config{MaxAttempts: 1, MaxThrottle: 1, Observer: &rec})
		hc := &http.Client{Transport: &backoff.Transport{Base: base, Client: c}}
		for range 100 {
			resp, err := hc.Get("http://downstream.test/")
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := sent
		var err error
		var body *closeTracker
		for i := 0; !errors.Is(err, backoff.ErrThrottled); i++ {
			if i == 1000 {
				t.Fatalf("1000 requests to a downstream refusing everything, none throttled: %+v", c.Stats())
			}
			body = &closeTracker{Reader: strings.NewReader("x")}
			req, _ := http.NewRequest("PUT", "http://downstream.test/", body)
			var resp *http.Response
			resp, err = hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		}
		if !body.closed.Load() {
			t.Error("the throttled request's body was not closed")
		}
		if re, ok := errors.AsType[*floodgate.RejectError](err); !ok || re.Status != 503 || re.RetryAfter() <= 0 {
			t.Errorf("throttled: %v, want a RejectError with Status 503 and a RetryAfter", err)
		}
		if st := c.Stats(); st.Attempts != int64(sent) || st.Throttled == 0 || int64(sent-before) > st.Calls {
			t.Errorf("Stats() = %+v with %d sent", st, sent)
		}
		var reason floodgate.Reason
		for _, e := range rec.Take() {
			if e.Kind == floodgate.KindReject && e.Reason != floodgate.ReasonThrottled {
				reason = e.Reason
				if re, ok := e.Err.(*floodgate.RejectError); !ok || re.Status != 503 {
					t.Errorf("downstream reject event %+v: want a RejectError with Status 503", e)
				}
			}
		}
		if reason != floodgate.ReasonUnavailable {
			t.Errorf("the downstream's 503 was reported as %q, want %q", reason, floodgate.ReasonUnavailable)
		}
	})
}

// TestTransportBudget: over 3,000 real HTTP calls to a server refusing half
// of them (503, Retry-After: 0), the extra calls stay within RetryBudget ×
// the first attempts plus MinRetries per Window.
func TestTransportBudget(t *testing.T) {
	var reached atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if rand.IntN(2) == 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer s.Close()
	const budget, minRetries, calls, workers = 0.1, 10, 3000, 8
	c := backoff.New(backoff.Config{RetryBudget: budget, MinRetries: minRetries, K: -1})
	hc := &http.Client{Transport: &backoff.Transport{Client: c}}
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= calls {
				resp, err := hc.Get(s.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	windows := int64(time.Since(start)/backoff.DefaultWindow) + 1
	limit := budget*calls + float64(minRetries*windows)
	extra := reached.Load() - calls
	t.Logf("%d calls in %v: %d reached the server (%d extra, %.2f%%; limit %.0f), %d budget-exhausted",
		st.Calls, time.Since(start).Round(time.Millisecond), reached.Load(), extra, 100*float64(extra)/calls, limit, st.BudgetExhausted)
	if st.Calls != calls || st.Attempts != reached.Load() {
		t.Errorf("Stats() = %+v, the server saw %d", st, reached.Load())
	}
	if float64(extra) > limit {
		t.Errorf("%d extra calls, above the budget's %.0f", extra, limit)
	}
	if float64(extra) < 0.95*budget*calls {
		t.Errorf("%d extra calls, want the budget of %.0f spent", extra, budget*calls)
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		v  string
		d  time.Duration
		ok bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"99999999999999999999", 1<<63 - 1, true},
		{"9223372037", 1<<63 - 1, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{" 1", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Fri, 02 Jan 2026 03:05:35 GMT", 90 * time.Second, true},
		{"soon", 0, false},
	} {
		if d, ok := backoff.RetryAfter(tc.v, now); d != tc.d || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.v, d, ok, tc.d, tc.ok)
		}
	}
}

// TestTransportCancelWhileWaiting: a context ended while waiting for a
// 429's Retry-After returns ctx.Err(), with the refused response and the
// body made for the retry both closed; the 429 is reported as limited.
func TestTransportCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec observetest.Recorder
		var resps []*closeTracker
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r.Body.Close()
			b := &closeTracker{Reader: strings.NewReader("slow down")}
			resps = append(resps, b)
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"5"}}, Body: b, Request: r}, nil
		})
		var bodies []*closeTracker
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://downstream.test/", strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", "k")
		req.GetBody = func() (io.ReadCloser, error) {
			b := &closeTracker{Reader: strings.NewReader("x")}
			bodies = append(bodies, b)
			return b, nil
		}
		time.AfterFunc(time.Second, cancel)
		tr := &backoff.Transport{Base: base, Client: backoff.New(backoff.Config{Observer: &rec})}
		resp, err := tr.RoundTrip(req)
		if resp != nil || err != context.Canceled {
			t.Fatalf("RoundTrip = %v, %v; want nil, context.Canceled", resp, err)
		}
		if len(resps) != 1 || !resps[0].closed.Load() || len(bodies) != 1 || !bodies[0].closed.Load() {
			t.Errorf("%d responses, %d retry bodies; want one each, closed", len(resps), len(bodies))
		}
		var limited bool
		for _, e := range rec.Take() {
			if re, ok := e.Err.(*floodgate.RejectError); ok && e.Kind == floodgate.KindReject && e.Reason == floodgate.ReasonLimited &&
				re.Status == 429 && re.RetryAfter() == 5*time.Second {
				limited = true
			}
		}
		if !limited {
			t.Error("no KindReject limited event with Status 429 and RetryAfter 5 s")
		}
	})
}
