package shaper

import (
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/internal/rateconv"
)

// A Rate is Count events per Period: Rate{Count: 5, Period: time.Second} is five
// events a second, Rate{Count: 1, Period: time.Minute} one a minute. A Rate says how
// fast events are released or admitted in the long run; how many may pass at once
// is a separate number (QueueConfig.Burst for a Queue, Limit.Burst for the meters), so
// the two are never confused as they are in x/time/rate.
//
// The zero Rate admits nothing.
type Rate struct {
	Count  int64         // events per Period; must be > 0 to admit anything
	Period time.Duration // length of the period; must be > 0 to admit anything
}

// PerSecond returns a Rate of n events per second.
func PerSecond(n int64) Rate { return Rate{Count: n, Period: time.Second} }

// PerMinute returns a Rate of n events per minute.
func PerMinute(n int64) Rate { return Rate{Count: n, Period: time.Minute} }

// PerHour returns a Rate of n events per hour.
func PerHour(n int64) Rate { return Rate{Count: n, Period: time.Hour} }

// Every returns a Rate of one event per interval.
func Every(interval time.Duration) Rate { return Rate{Count: 1, Period: interval} }

// Interval returns the emission interval Period/Count, the time one event "costs",
// truncated to a nanosecond. It returns 0 for a Rate that admits nothing.
func (r Rate) Interval() time.Duration {
	if r.Count <= 0 || r.Period <= 0 {
		return 0
	}
	return r.Period / time.Duration(r.Count)
}

// String returns the rate as "Count/Period", for example "5/1s".
func (r Rate) String() string { return fmt.Sprintf("%d/%v", r.Count, r.Period) }

// A Limit is what a meter enforces: a long-run Rate and a Burst.
//
// For GCRA ([NewMeter]) and the token bucket ([NewTokenBucket]), Burst is the most events admitted at once
// after a quiet period (the bucket capacity) and Rate is the refill rate: Limit{Rate:
// PerMinute(5), Burst: 5} admits five at once, then one every 12 s. For the window
// meters ([NewFixedWindow], [NewSlidingLog], [NewSlidingCounter]) Rate.Count events are admitted
// per window of length Rate.Period, and Burst must be zero or equal to Rate.Count.
type Limit struct {
	Rate Rate

	// Burst is the largest total cost admitted at once, and so the largest cost a
	// single call may ask for. If zero, Rate.Count: the whole period's allowance may
	// be used at once (as go-redis/redis_rate's PerSecond and PerMinute do).
	Burst int64
}

// String returns the limit as "Count/Period burst B".
func (l Limit) String() string { return fmt.Sprintf("%v burst %d", l.Rate, l.burst()) }

func (l Limit) burst() int64 { return rateconv.Burst(l.Rate.Count, l.Burst) }

// maxExact is the largest integer a Lua number (a float64) holds exactly. Every
// scaled quantity of the meters stays below it, so a Lua port of the same
// arithmetic computes the same integers.
const maxExact = rateconv.MaxExact

// validate returns the limit's period in whole microseconds, its count and its
// explicit burst, panicking on a limit no meter can enforce. what names the
// constructor or method for the message.
func (l Limit) validate(what string, window bool) (periodUS, count, burst int64) {
	return rateconv.Validate("shaper", what, l.Rate.Count, l.Rate.Period, l.Burst, window)
}

// A Decision is a meter's answer for one call.
type Decision struct {
	// Allowed reports whether the call was admitted (and its cost recorded).
	Allowed bool

	// Degraded reports that the shared store could not be asked: the policy
	// admitted the call (breaker.FailOpen) or a local share decided it
	// (breaker.FailLocal). The in-process meters never set it; shaperredis
	// does.
	Degraded bool

	// Remaining is the cost that could still be admitted at the same instant,
	// after this call.
	Remaining int64

	// RetryAfter is zero when Allowed; otherwise it is the shortest wait after
	// which the same call would be admitted if nothing else is admitted
	// meanwhile. It is never zero for a denied call and never a wait that cannot
	// succeed (a cost larger than the burst is an error instead).
	RetryAfter time.Duration

	// ResetAfter is the time until the key is back to its initial, unused state.
	ResetAfter time.Duration

	// Limit is the limit the decision was made under.
	Limit Limit

	// at is what a Refund needs to find the admission again: for the window
	// meters, the window (fixed window, sliding counter) or the entry's time
	// (sliding log) the cost was recorded under, in Unix µs; 0 otherwise.
	// (Degraded sits next to Allowed so that the struct stays 64 bytes.)
	at int64
}

// Err returns nil if d.Allowed, and otherwise a *[RejectError] carrying d.RetryAfter,
// so a denial can travel as an error (errors.Is(err, ErrLimited)).
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	return limited(d.RetryAfter)
}

// micros converts µs to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
