package shaperredis

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
)

// MeterStats counts the decisions of one Redis [Meter] in this process (the
// fleet's are the sum over its processes). Counters are totals since the
// meter was made.
type MeterStats struct {
	// Decisions by source: Store counts the decisions Redis made (admitted or
	// denied), Local those the FailLocal meter made while Redis could not
	// answer (admitted or denied), FailOpen the calls admitted under FailOpen
	// while Redis could not answer.
	Store, Local, FailOpen int64

	Admitted int64 // decisions that admitted, from every source
	Limited  int64 // rate denials (Allowed false), from Redis or the FailLocal meter

	// Refusals returned as errors, before or instead of a decision.
	TooLarge    int64 // a cost above the burst (ErrTooLarge)
	InvalidKey  int64 // a key longer than Config.MaxKeyLen
	Unavailable int64 // Redis could not answer under FailClosed (breaker.ErrUnavailable)
	Canceled    int64 // the caller's context ended first
	Errors      int64 // any other error (an unexpected reply, a Redis error reply)

	// Refunds counts the Refund calls that reached Redis (whether or not
	// the key still owed anything), RefundErrors those that failed (Redis
	// could not answer: that cost stays spent).
	Refunds, RefundErrors int64
}

// Indexes of the counters of a Meter.
const (
	mAdmitStore = iota
	mDenyStore
	mAdmitLocal
	mDenyLocal
	mFailOpen
	mTooLarge
	mInvalidKey
	mUnavailable
	mCanceled
	mErrors
	mRefunds
	mRefundErrors
	mCounters
)

// meterCounters are a Meter's counters: one atomic add per decision.
type meterCounters [mCounters]atomic.Int64

// Stats returns the meter's counters. Each is read atomically; the snapshot as
// a whole is not taken at one instant.
func (m *Meter) Stats() MeterStats {
	c := &m.stats
	st := MeterStats{
		FailOpen:     c[mFailOpen].Load(),
		TooLarge:     c[mTooLarge].Load(),
		InvalidKey:   c[mInvalidKey].Load(),
		Unavailable:  c[mUnavailable].Load(),
		Canceled:     c[mCanceled].Load(),
		Errors:       c[mErrors].Load(),
		Refunds:      c[mRefunds].Load(),
		RefundErrors: c[mRefundErrors].Load(),
	}
	as, ds, al, dl := c[mAdmitStore].Load(), c[mDenyStore].Load(), c[mAdmitLocal].Load(), c[mDenyLocal].Load()
	st.Store, st.Local = as+ds, al+dl
	st.Admitted = as + al + st.FailOpen
	st.Limited = ds + dl
	return st
}

// count records the outcome of one AllowN for key.
func (m *Meter) count(ctx context.Context, key string, d shaper.Decision, err error) {
	i := mAdmitStore
	switch {
	case err == nil:
		switch {
		case !d.Degraded:
			if !d.Allowed {
				i = mDenyStore
			}
		case m.local == nil:
			i = mFailOpen
		case d.Allowed:
			i = mAdmitLocal
		default:
			i = mDenyLocal
		}
	default:
		i = classify(ctx, err)
		if i == mErrors && !keyOK(key, m.maxKey) {
			i = mInvalidKey
		}
	}
	m.stats[i].Add(1)
}

// classify returns the counter of an error of a meter or queue call.
func classify(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, ErrTooLarge):
		return mTooLarge
	case errors.Is(err, breaker.ErrUnavailable):
		return mUnavailable
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return mCanceled
	}
	return mErrors
}

// QueueStats counts the calls of one Redis [Queue] in this process. Counters
// are totals since NewQueue; a call of weight zero is not counted.
type QueueStats struct {
	// Calls admitted (Wait returned nil), by source: Store (a slot reserved in
	// Redis), Local (the FailLocal queue), FailOpen (started at once because
	// Redis could not answer under FailOpen).
	Store, Local, FailOpen int64

	Waiting int64 // calls of this process in Wait now

	// Refusals by reason, from Redis or the FailLocal queue.
	RejectedQueueFull   int64
	RejectedMaxWait     int64
	RejectedDeadline    int64
	RejectedTooLarge    int64
	RejectedUnavailable int64 // Redis could not answer under FailClosed
	RejectedClosed      int64 // ErrClosed
	Canceled            int64 // the caller's context ended first
	Errors              int64 // any other error
}

// Admitted returns the calls admitted from every source.
func (st QueueStats) Admitted() int64 { return st.Store + st.Local + st.FailOpen }

// Indexes of the counters of a Queue.
const (
	qStore = iota
	qLocal
	qFailOpen
	qQueueFull
	qMaxWait
	qDeadline
	qTooLarge
	qUnavailable
	qClosed
	qCanceled
	qErrors
	qCounters
)

type queueCounters [qCounters]atomic.Int64

// Stats returns the queue's counters. Each is read atomically; the snapshot as
// a whole is not taken at one instant.
func (q *Queue) Stats() QueueStats {
	c := &q.stats
	st := QueueStats{
		Store:               c[qStore].Load(),
		Local:               c[qLocal].Load(),
		FailOpen:            c[qFailOpen].Load(),
		RejectedQueueFull:   c[qQueueFull].Load(),
		RejectedMaxWait:     c[qMaxWait].Load(),
		RejectedDeadline:    c[qDeadline].Load(),
		RejectedTooLarge:    c[qTooLarge].Load(),
		RejectedUnavailable: c[qUnavailable].Load(),
		RejectedClosed:      c[qClosed].Load(),
		Canceled:            c[qCanceled].Load(),
		Errors:              c[qErrors].Load(),
	}
	if q.waiting != nil {
		q.mu.Lock()
		st.Waiting = int64(len(q.waiting))
		q.mu.Unlock()
	}
	return st
}

// count records the outcome of one Wait of weight n whose decision came from
// src (meaningful only when Wait reached the store or its policy).
func (q *Queue) count(ctx context.Context, n int64, src breaker.Source, err error) {
	if n == 0 && err == nil {
		return
	}
	var i int
	switch {
	case err == nil && src == breaker.FromFailOpen:
		i = qFailOpen
	case err == nil && src == breaker.FromFailLocal:
		i = qLocal
	case err == nil:
		i = qStore
	case errors.Is(err, ErrQueueFull):
		i = qQueueFull
	case errors.Is(err, ErrMaxWait):
		i = qMaxWait
	case errors.Is(err, ErrDeadline):
		i = qDeadline
	case errors.Is(err, ErrClosed):
		i = qClosed
	default:
		switch classify(ctx, err) {
		case mTooLarge:
			i = qTooLarge
		case mUnavailable:
			i = qUnavailable
		case mCanceled:
			i = qCanceled
		default:
			i = qErrors
		}
	}
	q.stats[i].Add(1)
}
