package bulkhead

import (
	"math"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Handler returns a handler that admits each request through b's layers
// before calling h, holding the layers' gates until h returns or panics. The
// request's Identity comes from its context (see WithIdentity), so Handler
// goes inside the authentication middleware.
//
// A refused request gets the RejectError's Status (see Layer.Status and the
// Config statuses) with Retry-After in whole seconds, rounded up and at least 1
// whenever there is a delay, and the JSON body
//
//	{"error":"limited","message":"Quota exceeded. Retry in 12s.","retry_after_seconds":12}
//
// whose "error" is the RejectError's Reason (limited, no_capacity, max_wait,
// unavailable, no_identity, ...),
// or whatever Config.Render writes. The error's text never reaches the client.
// A request whose context ends while it waits for a gate (the client went
// away) gets 503 with no body. Used as a method value, b.Handler is a
// func(http.Handler) http.Handler.
func (b *Bulkhead) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p plan
		ctx := r.Context()
		req := Request{Method: r.Method, Path: r.URL.Path, HTTP: r}
		var err error
		if rerr := b.prepare(ctx, req, &p); rerr != nil {
			err = rerr
		} else {
			err = b.exec(ctx, &p, &invocation{h: h, w: w, r: r})
		}
		if err == nil {
			return
		}
		rerr, ok := err.(*RejectError)
		if !ok {
			// The request's context ended while it waited: nobody may be
			// listening, and there is nothing useful to say.
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b.writeFields(w, &p, rerr)
		if b.render != nil {
			b.render(w, r, rerr)
			return
		}
		writeBody(w, rerr)
	})
}

// writeFields sets Retry-After (on a rejection), the RateLimit fields and the
// degraded header on w, before anything is written.
func (b *Bulkhead) writeFields(w http.ResponseWriter, p *plan, rerr *RejectError) {
	if rerr != nil {
		if s := reject.Seconds(rerr.Delay); s > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(s, 10))
		}
	}
	if b.rateFields {
		var pol, cur []byte
		for i := range p.len() {
			s := p.at(i)
			if !s.hasD {
				continue
			}
			q, win, r, t, ok := rateItem(s, rerr)
			if !ok {
				continue
			}
			if pol != nil {
				pol, cur = append(pol, ", "...), append(cur, ", "...)
			}
			pol = strconv.AppendQuote(pol, s.l.Name)
			pol = strconv.AppendInt(append(pol, ";q="...), q, 10)
			pol = strconv.AppendInt(append(pol, ";w="...), win, 10)
			cur = strconv.AppendQuote(cur, s.l.Name)
			cur = strconv.AppendInt(append(cur, ";r="...), r, 10)
			cur = strconv.AppendInt(append(cur, ";t="...), t, 10)
		}
		if pol != nil {
			w.Header().Set("RateLimit-Policy", string(pol))
			w.Header().Set("RateLimit", string(cur))
		}
	}
	if b.degradedHdr != "" {
		var names []string
		for i := range p.len() {
			if s := p.at(i); s.hasD && s.d.Degraded {
				names = append(names, s.l.Name)
			}
		}
		if names != nil {
			w.Header().Set(b.degradedHdr, strings.Join(names, ", "))
		}
	}
}

// rateItem returns the RateLimit-Policy (q, w) and RateLimit (r, t)
// parameters of draft-ietf-httpapi-ratelimit-headers for step s, never more
// permissive than what the layer enforces, counted in requests (the quota
// unit the draft assumes), each the layer's N units:
//
//   - q is the most requests admitted at once (the burst, or the count if
//     less), and w the seconds the rate takes to earn them back, rounded up:
//     q requests in any w seconds are always admitted (in any 2w over a
//     sliding counter, an estimate), and q/w is never above the rate,
//     whatever the Burst.
//   - r is the requests admitted now, at most q; t the seconds, rounded up,
//     until the key is back to its initial state, with q or more.
//   - on this layer's own refusal (its rate, or its store under FailClosed),
//     r is 0 and t is the refusal's Retry-After, the same instant (draft
//     §6): the time until the refused request would be admitted, after
//     which the next response tells how many more.
//
// ok is false when the decision carries no limit (a store that could not be
// asked): the layer then has no item rather than a made-up one.
func rateItem(s *step, rerr *RejectError) (q, w, r, t int64, ok bool) {
	lim, n := s.d.Limit, s.l.n
	if lim.Rate.Count <= 0 || lim.Rate.Period <= 0 {
		return 0, 0, 0, 0, false
	}
	burst := lim.Burst
	if burst <= 0 || burst > lim.Rate.Count {
		burst = lim.Rate.Count
	}
	q = burst / n
	// The rate earns q·n units back in ⌈q·n·Period/Count⌉.
	hi, lo := bits.Mul64(uint64(lim.Rate.Period), uint64(q*n))
	earn := time.Duration(math.MaxInt64)
	if hi < uint64(lim.Rate.Count) {
		quo, rem := bits.Div64(hi, lo, uint64(lim.Rate.Count))
		if rem > 0 {
			quo++
		}
		earn = time.Duration(min(quo, math.MaxInt64))
	}
	w = max(reject.Seconds(earn), 1)
	if rerr != nil && rerr.Layer == s.l.Name && (rerr.Reason == floodgate.ReasonLimited || rerr.Reason == floodgate.ReasonUnavailable) {
		return q, w, 0, reject.Seconds(rerr.Delay), true
	}
	r = min(max(s.d.Remaining, 0)/n, q)
	return q, w, r, reject.Seconds(s.d.ResetAfter), true
}

// writeBody writes the default JSON rejection body ({"error", "message",
// "retry_after_seconds"}): the code is the Reason's word and the message is
// chosen from the status, never from the error's text.
func writeBody(w http.ResponseWriter, e *RejectError) {
	code, msg := string(e.Reason), http.StatusText(e.Status)
	if code == "" {
		code = string(floodgate.ReasonError)
	}
	switch e.Status {
	case http.StatusTooManyRequests:
		msg = "Quota exceeded."
	case http.StatusServiceUnavailable:
		msg = "Service temporarily unavailable."
	case http.StatusUnauthorized:
		msg = "Authentication required."
	case http.StatusForbidden:
		msg = "No quota for this client."
	case http.StatusInternalServerError:
		msg = "Internal server error."
	}
	if msg == "" {
		msg = "Request refused."
	}
	secs := reject.Seconds(e.Delay)
	buf := make([]byte, 0, 128)
	buf = append(buf, `{"error":`...)
	buf = strconv.AppendQuote(buf, code)
	buf = append(buf, `,"message":`...)
	if secs > 0 {
		msg += " Retry in " + strconv.FormatInt(secs, 10) + "s."
	}
	buf = strconv.AppendQuote(buf, msg)
	if secs > 0 {
		buf = append(buf, `,"retry_after_seconds":`...)
		buf = strconv.AppendInt(buf, secs, 10)
	}
	buf = append(buf, "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(buf)))
	w.WriteHeader(e.Status)
	w.Write(buf)
}
