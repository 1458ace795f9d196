package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/floodgate-go/floodgate"
)

// Default values of the Config fields.
const (
	DefaultConsecutiveFailures = 5
	DefaultMinCalls            = 20
	DefaultWindow              = 10 * time.Second
	DefaultWindowBuckets       = 10
	DefaultOpenDuration        = time.Second
	DefaultJitter              = 0.1
	DefaultHalfOpenProbes      = 1
	DefaultCallTimeout         = 250 * time.Millisecond
)

// Config configures a [Breaker]. The zero value is a valid Config: trip after 5
// consecutive store failures, stay open 1s (plus up to 10% jitter), let 1 probe
// through when half-open, bound each guarded call to 250ms, classify failures
// with [IsStoreFailure], and log transitions to [slog.Default].
//
// A Config is read once by [New]; changing it afterwards has no effect.
type Config struct {
	// ConsecutiveFailures trips the breaker when this many calls in a row
	// fail (see IsFailure). A call the store answers, even with a denial or
	// redis.Nil, resets the run. If zero, DefaultConsecutiveFailures (5) is
	// used. If negative, the rule is off, and FailureRatio must be set.
	ConsecutiveFailures int

	// FailureRatio, if positive, also trips the breaker when, over the last
	// Window, at least MinCalls calls completed and the fraction of them that
	// failed is at least FailureRatio. It must be in [0, 1]. If zero, the
	// ratio rule is off.
	FailureRatio float64

	// MinCalls is the number of completed calls in the Window below which
	// the ratio rule does not trip. Only used when FailureRatio is set. If
	// zero, DefaultMinCalls (20) is used. It must not be negative.
	MinCalls int

	// Window is the length of the rolling window of the ratio rule. Only used
	// when FailureRatio is set. If zero, DefaultWindow (10s) is used. It must
	// not be negative.
	Window time.Duration

	// WindowBuckets is the number of buckets the Window is divided into (it
	// rolls one bucket at a time; gobreaker's BucketPeriod = Window /
	// WindowBuckets). Only used when FailureRatio is set. If zero,
	// DefaultWindowBuckets (10) is used. It must not be negative, nor more
	// than Window in nanoseconds.
	WindowBuckets int

	// OpenDuration is how long the breaker stays open after it trips, before
	// it lets a probe through. If zero, DefaultOpenDuration (1s) is used. It
	// must not be negative.
	OpenDuration time.Duration

	// MaxOpenDuration, if greater than OpenDuration, makes the open time grow
	// on repeated trips: each time a half-open probe fails, the next open
	// period doubles, up to MaxOpenDuration (before jitter). A close resets it
	// to OpenDuration. If zero or not greater than OpenDuration, the open time
	// does not grow.
	MaxOpenDuration time.Duration

	// Jitter lengthens each open period by a random fraction of it in
	// [0, Jitter), so instances that tripped together do not all probe the
	// store at the same instant. If zero, DefaultJitter (0.1) is used. If
	// negative, there is no jitter. It must not be greater than 1.
	Jitter float64

	// HalfOpenProbes is the number of calls let through at once while
	// half-open, and the number of consecutive successes that close the
	// breaker (gobreaker's MaxRequests). Other calls are answered by the
	// policy. If zero, DefaultHalfOpenProbes (1) is used. It must not be
	// negative.
	HalfOpenProbes int

	// Probe, if non-nil, is how the breaker itself asks the store whether it
	// is back (for Redis, a PING), so that no caller waits on a probe: once
	// an open period has ended, the next call starts Probe in a goroutine of
	// the breaker's own and is answered by its policy at once, as every call
	// is until the probes have closed the breaker. HalfOpenProbes successful
	// probes in a row close it, one failure (classified as a guarded call's
	// outcome is) opens it again. Each probe gets a context that ends
	// CallTimeout from its start (DefaultCallTimeout if CallTimeout is off),
	// so the goroutine ends within HalfOpenProbes × that; at most one runs at
	// a time, and none runs unless a call finds the open period over.
	//
	// If nil, a half-open breaker lets callers' own calls through as probes
	// (gobreaker's model), and each probe's caller waits for the store's
	// answer or CallTimeout. floodgate's Redis-backed limiters give a
	// Breaker that has no Probe a PING on their client (see shaperredis,
	// distsem, adaptiveredis), so that a Redis still gone costs a probe's
	// caller nothing.
	Probe func(ctx context.Context) error

	// CallTimeout is the one per-call timeout of every store call made
	// through [Do]: the call gets a context that ends CallTimeout from now, or
	// at the caller's own deadline when that is sooner (the caller's deadline
	// wins). If zero, DefaultCallTimeout (250ms) is used. If negative, calls
	// have no per-call timeout (only the caller's context and the client's own
	// socket timeouts bound them).
	//
	// A call that outlives CallTimeout while the caller's context is not done
	// is a store failure: it is counted, and under FailClosed Do returns a
	// [*StoreError] matching [ErrTimeout] and [ErrUnavailable], never
	// context.DeadlineExceeded. The caller's own context ending is not
	// counted, and Do returns ctx.Err().
	//
	// Set it below the deadlines of your callers: if every caller's deadline
	// is shorter, a frozen store burns each caller's deadline and never trips
	// the breaker through timeouts, because the caller's deadline is not a
	// store failure.
	CallTimeout time.Duration

	// IsFailure reports whether an error returned by a guarded call means the
	// store is unhealthy. It is not consulted for nil errors, for calls whose
	// caller context is done, or when CallTimeout expired (a failure). An
	// error for which it returns false counts as an answer from a healthy
	// store (a success), except a context error, which is not counted. If
	// nil, [IsStoreFailure] is used. It is called without locks held.
	IsFailure func(err error) bool

	// Observer, if non-nil, is told of each state transition
	// (floodgate.KindStateChange, From and To the states' words) and of each
	// guarded call that reached the store (floodgate.KindStoreCall: its
	// Duration; Err, set when its outcome was a store failure, ErrTimeout for
	// a timeout; Source, FromStore's word when the store answered, else the
	// word of the policy's answer). Calls refused while open and calls ended
	// by the caller's context are not store calls. Events have Component
	// floodgate.ComponentBreaker. Observe is called without any lock held, on
	// the caller's goroutine: transitions once each, in order, never
	// concurrently with one another (a goroutine already reporting them
	// reports the ones that come meanwhile), before the call that caused them
	// returns (a transition caused by the breaker's own Probe, on the probe's
	// goroutine); it may call methods on the Breaker. The breaker's own
	// probes are not store calls of a caller: Stats counts them (Probes).
	Observer floodgate.Observer

	// Logger receives exactly one line per state transition (Warn when
	// opening, Info otherwise) and never one per call. If nil, slog.Default()
	// at the time of the transition is used. To silence it, use
	// slog.New(slog.DiscardHandler).
	Logger *slog.Logger
}

// Validate reports whether c is usable by [New], and if not, why. New panics
// with the same message.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.FailureRatio) || c.FailureRatio < 0 || c.FailureRatio > 1:
		return errors.New("breaker: FailureRatio not in [0, 1]")
	case c.ConsecutiveFailures < 0 && c.FailureRatio == 0:
		return errors.New("breaker: no trip rule (ConsecutiveFailures < 0 and FailureRatio = 0)")
	case c.MinCalls < 0:
		return errors.New("breaker: MinCalls < 0")
	case c.Window < 0:
		return errors.New("breaker: Window < 0")
	case c.WindowBuckets < 0:
		return errors.New("breaker: WindowBuckets < 0")
	case c.FailureRatio > 0 && c.WindowBuckets > 0 && time.Duration(c.WindowBuckets) > c.window():
		return errors.New("breaker: WindowBuckets > Window in nanoseconds")
	case c.OpenDuration < 0:
		return errors.New("breaker: OpenDuration < 0")
	case c.MaxOpenDuration < 0:
		return errors.New("breaker: MaxOpenDuration < 0")
	case math.IsNaN(c.Jitter) || c.Jitter > 1:
		return errors.New("breaker: Jitter > 1")
	case c.HalfOpenProbes < 0:
		return errors.New("breaker: HalfOpenProbes < 0")
	case uint64(c.HalfOpenProbes) > math.MaxUint32:
		return errors.New("breaker: HalfOpenProbes too large")
	}
	return nil
}

func (c Config) consecutiveFailures() int {
	if c.ConsecutiveFailures == 0 {
		return DefaultConsecutiveFailures
	}
	return c.ConsecutiveFailures // negative: off
}

func (c Config) minCalls() int { return orDefault(c.MinCalls, DefaultMinCalls) }

func (c Config) window() time.Duration { return orDefault(c.Window, DefaultWindow) }

func (c Config) windowBuckets() int { return orDefault(c.WindowBuckets, DefaultWindowBuckets) }

func (c Config) openDuration() time.Duration { return orDefault(c.OpenDuration, DefaultOpenDuration) }

func (c Config) maxOpenDuration() time.Duration {
	return max(c.MaxOpenDuration, c.openDuration())
}

func (c Config) jitter() float64 {
	switch {
	case c.Jitter == 0:
		return DefaultJitter
	case c.Jitter < 0:
		return 0
	}
	return c.Jitter
}

func (c Config) halfOpenProbes() int { return orDefault(c.HalfOpenProbes, DefaultHalfOpenProbes) }

func (c Config) callTimeout() time.Duration {
	switch {
	case c.CallTimeout == 0:
		return DefaultCallTimeout
	case c.CallTimeout < 0:
		return 0 // off
	}
	return c.CallTimeout
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
