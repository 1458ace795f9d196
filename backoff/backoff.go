package backoff

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// ErrThrottled is returned, in a [*RejectError] with Status 503, when the
// client refuses a call itself (adaptive throttling): the call was not made.
// Its RetryAfter estimates when the throttle would admit every call if no
// more refusals came: the time until enough of the refusals it remembers
// have left the Window. It is an estimate; a call made sooner may pass.
var ErrThrottled = reject.Sentinel(floodgate.ReasonThrottled, "backoff: throttled")

// RejectError is floodgate's refusal type: a throttled call's error
// ([ErrThrottled]), and what the Observer is given for the downstream's
// refusals.
type RejectError = floodgate.RejectError

// The defaults of Config.
const (
	DefaultMaxAttempts   = 3
	DefaultBaseDelay     = 50 * time.Millisecond
	DefaultMaxDelay      = 2 * time.Second
	DefaultMaxRetryAfter = 10 * time.Second
	DefaultWindow        = 10 * time.Second
	DefaultK             = 2
	DefaultMaxThrottle   = 0.9
	DefaultMinRequests   = 20
	DefaultRetryBudget   = 0.1
	DefaultMinRetries    = 10
)

// Config configures a Client. The zero value is a valid Config: 3 attempts
// per call, backoff from 50 ms to 2 s, Retry-After honoured up to 10 s, the
// SRE throttle with K = 2 over 10 s (from 20 attempts on), and a retry budget of 10% of the first
// attempts plus 10 retries per 10 s.
type Config struct {
	// Name is the Part of the Client's events ("" for none): the
	// downstream's name, a bounded set.
	Name string

	// MaxAttempts bounds the attempts of one call, the first included. If
	// zero, 3; 1 (or a negative value) makes no retries, which keeps the
	// throttle.
	MaxAttempts int

	// BaseDelay and MaxDelay shape the wait before a retry of a refusal
	// that carries no delay: a uniformly random wait in [0, min(MaxDelay,
	// BaseDelay·2^(n−1))) before retry n ("full jitter"). If zero, 50 ms
	// and 2 s.
	BaseDelay, MaxDelay time.Duration

	// MaxRetryAfter is the longest delay asked by the downstream (a
	// RetryAfter, a Retry-After header) that a call waits for; a refusal
	// asking for longer is returned at once, as is one whose delay would end
	// after the context's deadline. If zero, 10 s; if negative, any delay
	// is waited for (the deadline still bounds it).
	MaxRetryAfter time.Duration

	// Window is the span of the throttle's and the budget's memory: both
	// count over the last Window, in ten slices. If zero, 10 s.
	Window time.Duration

	// K is the SRE book's multiplier: over the Window, with R attempts (the
	// ones the client refused itself included) and A attempts the
	// downstream did not refuse, an attempt is refused locally with
	// probability (R − K·A)/(R + 1), at most MaxThrottle. The throttle
	// begins when fewer than 1/K of the attempts are accepted. If zero, 2;
	// if negative, the Client never throttles.
	K float64

	// MinRequests is the attempts over the Window below which the Client
	// never throttles: with a handful of attempts the formula is noise (its
	// first refusal alone would throttle the retry with probability 1/2).
	// If zero, 20; if negative, none.
	MinRequests int

	// MaxThrottle caps the probability of a local refusal, so that while
	// the downstream refuses everything 1 − MaxThrottle of the attempts
	// still reach it, and the client sees its recovery within about a
	// Window (failsafe-go caps at 0.9, Envoy's admission control at 0.8).
	// If zero, 0.9; 1 is the book's formula, whose recovery from a long
	// outage takes several Windows. Values above 1 panic.
	MaxThrottle float64

	// RetryBudget bounds the retries over the Window to RetryBudget × the
	// first attempts sent over it, plus MinRetries: past it a refused call
	// returns its refusal. If zero, 0.1; if negative, only the MinRetries
	// floor is spent.
	RetryBudget float64

	// MinRetries is the retries per Window allowed beyond RetryBudget, so
	// that a client with little traffic can still retry. If zero, 10; if
	// negative, none.
	MinRetries int

	// Refused, if non-nil, classifies the errors of Do's function: ok
	// reports that err is the downstream refusing the call for overload,
	// and delay the wait it asks for (0: none, the backoff applies). If
	// nil, an error is a refusal when it has a RetryAfter() time.Duration
	// method (errors.As; every floodgate refusal does), with that delay,
	// except a floodgate *RejectError whose Reason says retrying cannot
	// help (too large, invalid key, no identity, no policy, closed).
	// Refused is not called with a nil error, nor by Transport.
	Refused func(err error) (delay time.Duration, ok bool)

	// Observer, if non-nil, is told of each attempt sent (KindAdmit;
	// Duration: the wait before it, 0 for the first), of each refusal by
	// the downstream (KindReject with the refusal's reason; Err is the
	// error, for Transport a *RejectError with the response's Status and
	// Retry-After), of each attempt the client refused itself (KindReject,
	// ReasonThrottled), and of a call whose context ended while it waited
	// to retry (KindCancel). A retry the budget does not allow has no
	// event of its own (the call's refusal was reported; Stats counts it).
	// Component is ComponentBackoff, Part is Name, N is 1.
	Observer floodgate.Observer
}

// slices is the number of slices of a Window.
const slices = 10

// A slice is what one tenth of the Window counted.
type slice struct {
	requests int64 // attempts, the locally refused included (R)
	accepts  int64 // attempts the downstream did not refuse (A)
	firsts   int64 // first attempts sent
	retries  int64 // retries sent
	local    int64 // attempts the Client refused itself (in requests)
	refusals int64 // attempts the downstream refused (not in the ring's sum)
}

// A Client makes calls to one downstream, backing off by itself: it waits
// what the downstream asks before retrying a refusal, refuses calls itself
// while the downstream refuses most of them, and spends a bounded retry
// budget. Use one Client per destination, shared by every goroutine calling
// it: its memory is of that downstream.
//
// Use New: the zero Client makes each call once, as it is, and counts
// nothing. A Client is safe for concurrent use by multiple goroutines.
type Client struct {
	name          string
	maxAttempts   int
	base, maxWait time.Duration
	maxRetryAfter time.Duration // < 0: unbounded
	width         time.Duration // a slice's span
	k             float64       // < 0: no throttle
	maxThrottle   float64
	minRequests   int64
	quiet         int64 // accepts that make a slice without refusals count (forgetLocked)
	budget        float64
	minRetries    int64
	refused       func(error) (time.Duration, bool)
	obs           floodgate.Observer
	born          time.Time

	mu sync.Mutex
	// mu guards:
	ring [slices]slice
	cur  int64 // the newest slice's number
	sum  slice // the ring's totals
	st   Stats
}

// Stats are a Client's counts since New, and its throttle now.
type Stats struct {
	Calls           int64 // calls (Do, RoundTrip)
	Attempts        int64 // attempts sent to the downstream, retries included
	Retries         int64 // attempts after a call's first
	Refused         int64 // attempts the downstream refused for overload
	Throttled       int64 // attempts the client refused itself (first or retry)
	BudgetExhausted int64 // retries not made because the retry budget was spent

	// Throttle is the probability that an attempt made now is refused
	// locally, from the counts over the Window.
	Throttle float64
}

// New returns a Client configured by cfg. It panics if a duration, K or
// MaxThrottle is not valid (MaxThrottle above 1, a negative BaseDelay,
// MaxDelay or Window).
func New(cfg Config) *Client {
	if cfg.BaseDelay < 0 || cfg.MaxDelay < 0 || cfg.Window < 0 {
		panic("backoff: negative BaseDelay, MaxDelay or Window")
	}
	if cfg.MaxThrottle > 1 || cfg.MaxThrottle < 0 {
		panic("backoff: MaxThrottle outside 0..1")
	}
	c := &Client{
		name:          cfg.Name,
		maxAttempts:   orDefault(cfg.MaxAttempts, DefaultMaxAttempts),
		base:          orDefault(cfg.BaseDelay, DefaultBaseDelay),
		maxWait:       orDefault(cfg.MaxDelay, DefaultMaxDelay),
		maxRetryAfter: orDefault(cfg.MaxRetryAfter, DefaultMaxRetryAfter),
		width:         orDefault(cfg.Window, DefaultWindow) / slices,
		k:             orDefault(cfg.K, DefaultK),
		maxThrottle:   orDefault(cfg.MaxThrottle, DefaultMaxThrottle),
		minRequests:   int64(max(orDefault(cfg.MinRequests, DefaultMinRequests), 0)),
		budget:        max(orDefault(cfg.RetryBudget, DefaultRetryBudget), 0),
		minRetries:    int64(max(orDefault(cfg.MinRetries, DefaultMinRetries), 0)),
		refused:       cfg.Refused,
		obs:           cfg.Observer,
		born:          time.Now(),
	}
	c.maxAttempts = max(c.maxAttempts, 1)
	c.quiet = max(2, c.minRequests/slices)
	c.width = max(c.width, 1)
	if c.maxWait < c.base {
		c.maxWait = c.base
	}
	return c
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Stats returns the Client's counts and its throttle now.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	st := c.st
	st.Throttle = c.throttleLocked()
	return st
}

// Do calls fn(ctx), and again while it returns a refusal and the rules
// allow (see the package doc): at most MaxAttempts times, waiting before
// each retry what the refusal asks (or the backoff), while the retry budget
// lasts and the throttle lets the retry through. fn must return when ctx is
// done.
//
// Do returns nil or fn's last error. It returns a *RejectError matching
// [ErrThrottled], without calling fn, when the client refuses the call
// itself; ctx.Err() when ctx is done before the first attempt or while it
// waits to retry; and the refusal as it is when it is not retried (its delay
// is longer than MaxRetryAfter or would end after ctx's deadline, the
// budget is spent, the throttle refused the retry, or the attempts are
// used up). Do allocates nothing when fn succeeds at once.
func (c *Client) Do(ctx context.Context, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.width == 0 { // the zero Client
		return fn(ctx)
	}
	if err := c.begin(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			c.accepted()
			return nil
		}
		delay, refused := c.classify(err)
		if !refused {
			c.accepted()
			return err
		}
		wait, retry := c.refusal(ctx, attempt, delay, delay > 0, reject.ReasonOf(err), err)
		if !retry {
			return err
		}
		if werr := c.sleep(ctx, wait); werr != nil {
			return werr
		}
	}
}

// classify returns whether err (non-nil) is an overload refusal and its
// delay.
func (c *Client) classify(err error) (time.Duration, bool) {
	if c.refused != nil {
		d, ok := c.refused(err)
		return max(d, 0), ok
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		return 0, false
	}
	if re, ok := errors.AsType[*RejectError](err); ok {
		switch re.Reason {
		case floodgate.ReasonTooLarge, floodgate.ReasonInvalidKey, floodgate.ReasonNoIdentity,
			floodgate.ReasonNoPolicy, floodgate.ReasonClosed:
			return 0, false
		}
	}
	return max(ra.RetryAfter(), 0), true
}

// begin counts a call and its first attempt, which it refuses with an
// ErrThrottled refusal when the throttle says so.
func (c *Client) begin() error {
	c.mu.Lock()
	c.advanceLocked()
	c.st.Calls++
	if c.throttledLocked() {
		est := c.clearsInLocked()
		c.mu.Unlock()
		err := &RejectError{Reason: floodgate.ReasonThrottled, Err: ErrThrottled, Delay: est, Status: http.StatusServiceUnavailable}
		c.observe(floodgate.Event{Kind: floodgate.KindReject, Reason: floodgate.ReasonThrottled, Err: err})
		return err
	}
	c.st.Attempts++
	c.ring[c.cur%slices].firsts++
	c.sum.firsts++
	c.mu.Unlock()
	c.observe(floodgate.Event{Kind: floodgate.KindAdmit})
	return nil
}

// accepted counts an attempt the downstream did not refuse.
func (c *Client) accepted() {
	c.mu.Lock()
	c.advanceLocked()
	c.ring[c.cur%slices].accepts++
	c.sum.accepts++
	c.mu.Unlock()
}

// refusal counts a refusal of attempt (its delay, if hasDelay; its reason
// and err for the Observer) and decides whether the call retries it, and
// after how long. When it retries, the retry is counted as sent.
func (c *Client) refusal(ctx context.Context, attempt int, delay time.Duration, hasDelay bool, reason floodgate.Reason, err error) (time.Duration, bool) {
	wait, ok := c.retryWait(ctx, attempt, delay, hasDelay)
	throttled := false
	var est time.Duration
	c.mu.Lock()
	c.advanceLocked()
	c.st.Refused++
	s := &c.ring[c.cur%slices]
	s.refusals++
	if ok {
		switch {
		case float64(c.sum.retries) >= c.budget*float64(c.sum.firsts)+float64(c.minRetries):
			c.st.BudgetExhausted++
			ok = false
		case c.throttledLocked():
			ok, throttled = false, true
			est = c.clearsInLocked()
		default:
			c.st.Attempts++
			c.st.Retries++
			s.retries++
			c.sum.retries++
		}
	}
	c.mu.Unlock()
	if c.obs != nil {
		c.observe(floodgate.Event{Kind: floodgate.KindReject, Reason: reason, Err: err})
		if throttled {
			c.observe(floodgate.Event{Kind: floodgate.KindReject, Reason: floodgate.ReasonThrottled,
				Err: &RejectError{Reason: floodgate.ReasonThrottled, Err: ErrThrottled, Delay: est, Status: http.StatusServiceUnavailable}})
		}
	}
	return wait, ok
}

// retryWait returns the wait before retrying attempt, and false when the
// call must not retry: the attempts are used up, the delay asked is beyond
// MaxRetryAfter, or the wait would end after ctx's deadline.
func (c *Client) retryWait(ctx context.Context, attempt int, delay time.Duration, hasDelay bool) (time.Duration, bool) {
	if attempt >= c.maxAttempts {
		return 0, false
	}
	var wait time.Duration
	if hasDelay {
		if c.maxRetryAfter >= 0 && delay > c.maxRetryAfter {
			return 0, false
		}
		// Up to a tenth more, so that the clients told the same
		// Retry-After do not all come back at one instant.
		wait = delay
		if j := delay / 10; j > 0 && j < math.MaxInt64-delay {
			wait += rand.N(j + 1) // no overflow: delay + j fits
		}
	} else {
		ceil := c.base << min(attempt-1, 62)
		if ceil <= 0 || ceil > c.maxWait {
			ceil = c.maxWait
		}
		wait = rand.N(ceil)
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left < delay || (!hasDelay && left < wait) {
			return 0, false
		}
		wait = min(wait, left) // the jitter does not go past the deadline
	}
	return wait, true
}

// sleep waits d or until ctx is done, and reports the next attempt to the
// Observer; it returns ctx.Err() if ctx ended first.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			c.observe(floodgate.Event{Kind: floodgate.KindCancel, Duration: d, Err: ctx.Err()})
			return ctx.Err()
		}
	} else if err := ctx.Err(); err != nil {
		c.observe(floodgate.Event{Kind: floodgate.KindCancel, Err: err})
		return err
	}
	c.observe(floodgate.Event{Kind: floodgate.KindAdmit, Duration: d})
	return nil
}

func (c *Client) observe(e floodgate.Event) {
	if c.obs == nil {
		return
	}
	e.Component, e.Part, e.N = floodgate.ComponentBackoff, c.name, 1
	c.obs.Observe(e)
}

// advanceLocked moves the ring to now: slices older than the Window are
// emptied and their counts leave the totals.
func (c *Client) advanceLocked() {
	if c.width == 0 { // the zero Client
		return
	}
	idx := int64(time.Since(c.born) / c.width)
	if idx <= c.cur {
		return
	}
	if idx-c.cur >= slices {
		c.ring = [slices]slice{}
		c.sum = slice{}
		c.cur = idx
		return
	}
	if s := &c.ring[c.cur%slices]; s.refusals == 0 && s.accepts >= c.quiet && c.sum.local > 0 {
		c.forgetLocked()
	}
	for i := c.cur + 1; i <= idx; i++ {
		s := &c.ring[i%slices]
		c.sum.requests -= s.requests
		c.sum.accepts -= s.accepts
		c.sum.firsts -= s.firsts
		c.sum.retries -= s.retries
		c.sum.local -= s.local
		*s = slice{}
	}
	c.cur = idx
}

// forgetLocked takes the Client's own refusals out of R. It is called when
// a slice has just ended in which the downstream accepted attempts (at
// least quiet) and refused none: the local refusals were evidence of an
// overload that is over, and counting them for the rest of the Window
// would keep the throttle on (the book's rule alone opens 1.65 Windows
// after a recovery; with this, the throttle is 0 two to three slices after
// it). While the
// downstream refuses any attempt in a slice, nothing is forgotten, so the
// book's steady state (about K·A attempts sent per Window) is unchanged.
func (c *Client) forgetLocked() {
	for i := range c.ring {
		s := &c.ring[i]
		s.requests -= s.local
		s.local = 0
	}
	c.sum.requests -= c.sum.local
	c.sum.local = 0
}

// throttleLocked returns the probability of a local refusal now.
func (c *Client) throttleLocked() float64 {
	if c.k < 0 || c.sum.requests < c.minRequests {
		return 0
	}
	r, a := float64(c.sum.requests), float64(c.sum.accepts)
	return min(max(0, (r-c.k*a)/(r+1)), c.maxThrottle)
}

// throttledLocked counts an attempt in R and reports whether the throttle
// refuses it (counting it as throttled).
func (c *Client) throttledLocked() bool {
	p := c.throttleLocked()
	c.ring[c.cur%slices].requests++
	c.sum.requests++
	if p > 0 && rand.Float64() < p {
		c.st.Throttled++
		c.ring[c.cur%slices].local++
		c.sum.local++
		return true
	}
	return false
}

// clearsInLocked estimates when the throttle would let every attempt
// through were nothing more counted: when enough of the oldest slices have
// left the Window for R ≤ K·A (or R below MinRequests).
func (c *Client) clearsInLocked() time.Duration {
	r, a := c.sum.requests, c.sum.accepts
	elapsed := time.Since(c.born)
	for i := c.cur - slices + 1; i <= c.cur; i++ {
		if i >= 0 {
			s := &c.ring[i%slices]
			r -= s.requests
			a -= s.accepts
		}
		if float64(r) <= c.k*float64(a) || r < c.minRequests {
			return max(time.Duration(i+slices)*c.width-elapsed, 0)
		}
	}
	return max(time.Duration(c.cur+slices)*c.width-elapsed, 0)
}
