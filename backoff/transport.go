package backoff

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"time"

	"github.com/floodgate-go/floodgate"
)

// Transport is an http.RoundTripper that sends requests through Base under
// a Client's rules: a response 429 Too Many Requests or 503 Service
// Unavailable is a refusal, retried after its Retry-After (seconds or an
// HTTP-date) or, without one, after the Client's backoff; every other
// response, and every error of Base, is an answer, returned as Base
// returned it. The Client's throttle may refuse a request without sending
// it: RoundTrip then closes the request's body and returns a *RejectError
// matching [ErrThrottled] (which http.Client wraps in a *url.Error).
//
// Only a request that can be sent again is retried: its body is nil,
// http.NoBody or has GetBody, and its method is idempotent (GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE; RFC 9110 §9.2.2) or it carries an
// Idempotency-Key or X-Idempotency-Key header. (net/http's own rule for
// replaying a request after a broken connection leaves out PUT and DELETE,
// because such a request may have been half done; a 429 or 503 is the
// downstream's answer that it was not done.) Any other request is sent
// once, still counted by the throttle. The response of a refused attempt
// that is retried is drained (up to 4 KiB) and closed; the response
// returned is the last one, untouched. A request whose context is already
// done is passed to Base as it is.
//
// The zero Transport, or one with a nil or zero Client, sends every request
// through Base once, as it is; a nil Base is http.DefaultTransport. A
// Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	// Base sends the requests; if nil, http.DefaultTransport.
	Base http.RoundTripper
	// Client is the downstream's Client; share one for every Transport to
	// the same destination.
	Client *Client
}

// drainMax bounds what is read of a refused response before closing it, so
// that its connection can be reused (net/http's redirects drain 2 KiB).
const drainMax = 4 << 10

var (
	errTooManyRequests = errors.New("backoff: the downstream answered 429 Too Many Requests")
	errUnavailable     = errors.New("backoff: the downstream answered 503 Service Unavailable")
)

// RoundTrip sends req (see Transport).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	c := t.Client
	ctx := req.Context()
	if c == nil || c.width == 0 || ctx.Err() != nil {
		return base.RoundTrip(req)
	}
	if err := c.begin(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	replay := replayable(req)
	r := req
	for attempt := 1; ; attempt++ {
		resp, err := base.RoundTrip(r)
		if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
			c.accepted()
			return resp, err
		}
		delay, hasDelay := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		var rerr error
		reason := floodgate.ReasonUnavailable
		if c.obs != nil {
			e := errUnavailable
			if resp.StatusCode == http.StatusTooManyRequests {
				e, reason = errTooManyRequests, floodgate.ReasonLimited
			}
			rerr = &RejectError{Reason: reason, Err: e, Delay: delay, Status: resp.StatusCode}
		}
		// The retry's body is made first, so that a GetBody that fails
		// makes this refusal the last, as if it could not be replayed.
		var body io.ReadCloser
		if replay && req.Body != nil && req.Body != http.NoBody {
			var err error
			if body, err = req.GetBody(); err != nil {
				replay = false
			}
		}
		n := attempt
		if !replay {
			n = c.maxAttempts // counted as a refusal, never retried
		}
		wait, retry := c.refusal(ctx, n, delay, hasDelay, reason, rerr)
		if !retry {
			if body != nil {
				body.Close()
			}
			return resp, nil
		}
		next := req.Clone(ctx)
		if body != nil {
			next.Body = body
		}
		io.CopyN(io.Discard, resp.Body, drainMax)
		resp.Body.Close()
		if err := c.sleep(ctx, wait); err != nil {
			if next.Body != nil {
				next.Body.Close()
			}
			return nil, err
		}
		r = next
	}
}

// replayable reports whether req may be sent again (see Transport).
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, k := req.Header[textproto.CanonicalMIMEHeaderKey("Idempotency-Key")]
	_, x := req.Header[textproto.CanonicalMIMEHeaderKey("X-Idempotency-Key")]
	return k || x
}

// retryAfter parses a Retry-After value, delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3) relative to now; ok is false when v is neither. A date
// in the past is a delay of 0; a number of seconds too large for a
// Duration is the largest Duration.
func retryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return math.MaxInt64, true
			}
			return 0, false
		}
		if n > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
