package shaperredis

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
)

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
	mCarried
	mCounters
)

// meterCounters are a Meter's counters: one atomic add per decision.
type meterCounters [mCounters]atomic.Uint64

// Stats returns the meter's counters in this process (the fleet's are the
// sums over its processes): [shaper.MeterStats], the one type of every
// meter, with the fields of a store-backed meter set (decisions by source,
// invalid keys, cancellations, errors, refund errors). Refunded counts the
// Refunds that gave something back in Redis. Peeks (n = 0) are not counted.
// Each counter is read atomically; the snapshot as a whole is not taken at
// one instant.
func (m *Meter) Stats() shaper.MeterStats {
	c := &m.stats
	as, ds, al, dl := c[mAdmitStore].Load(), c[mDenyStore].Load(), c[mAdmitLocal].Load(), c[mDenyLocal].Load()
	fo := c[mFailOpen].Load()
	return shaper.MeterStats{
		Allowed:      as + al + fo,
		Denied:       ds + dl,
		TooLarge:     c[mTooLarge].Load(),
		Refunded:     c[mRefunds].Load(),
		Store:        as + ds,
		FailOpen:     fo,
		FailLocal:    al + dl,
		FailClosed:   c[mUnavailable].Load(),
		InvalidKey:   c[mInvalidKey].Load(),
		Canceled:     c[mCanceled].Load(),
		Errors:       c[mErrors].Load(),
		RefundErrors: c[mRefundErrors].Load(),
		Carried:      c[mCarried].Load(),
	}
}

// meterEvents are the Observer's event of each counter of a decision.
var meterEvents = [mRefunds]floodgate.Event{
	mAdmitStore:  {Kind: floodgate.KindAdmit, Source: floodgate.SourceStore},
	mDenyStore:   {Kind: floodgate.KindReject, Reason: floodgate.ReasonLimited, Source: floodgate.SourceStore},
	mAdmitLocal:  {Kind: floodgate.KindAdmit, Source: floodgate.SourceFailLocal},
	mDenyLocal:   {Kind: floodgate.KindReject, Reason: floodgate.ReasonLimited, Source: floodgate.SourceFailLocal},
	mFailOpen:    {Kind: floodgate.KindAdmit, Source: floodgate.SourceFailOpen},
	mTooLarge:    {Kind: floodgate.KindReject, Reason: floodgate.ReasonTooLarge},
	mInvalidKey:  {Kind: floodgate.KindReject, Reason: floodgate.ReasonInvalidKey},
	mUnavailable: {Kind: floodgate.KindReject, Reason: floodgate.ReasonUnavailable, Source: floodgate.SourceFailClosed},
	mCanceled:    {Kind: floodgate.KindCancel},
	mErrors:      {Kind: floodgate.KindReject, Reason: floodgate.ReasonError},
}

// observe tells the Observer of one decision of cost n, counted as i, that
// returned err.
func (m *Meter) observe(i int, n int64, err error) {
	e := meterEvents[i]
	e.Component, e.N, e.Err = floodgate.ComponentMeter, n, err
	m.obs.Observe(e)
}

// count records the outcome of one AllowN for key and returns its counter.
func (m *Meter) count(ctx context.Context, key string, d shaper.Decision, err error) int {
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
	return i
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
	// Redis), FailLocal (the FailLocal queue), FailOpen (started at once because
	// Redis could not answer under FailOpen).
	Store, FailLocal, FailOpen int64

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
func (st QueueStats) Admitted() int64 { return st.Store + st.FailLocal + st.FailOpen }

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
		FailLocal:           c[qLocal].Load(),
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
// src (meaningful only when Wait reached the store or its policy), and
// returns its counter, or -1 for a call of weight zero.
func (q *Queue) count(ctx context.Context, n int64, src breaker.Source, err error) int {
	if n == 0 && err == nil {
		return -1
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
	return i
}

// queueEvents are the Observer's event of each counter of a Queue.
var queueEvents = [qCounters]floodgate.Event{
	qStore:       {Kind: floodgate.KindAdmit, Source: floodgate.SourceStore},
	qLocal:       {Kind: floodgate.KindAdmit, Source: floodgate.SourceFailLocal},
	qFailOpen:    {Kind: floodgate.KindAdmit, Source: floodgate.SourceFailOpen},
	qQueueFull:   {Kind: floodgate.KindReject, Reason: floodgate.ReasonQueueFull},
	qMaxWait:     {Kind: floodgate.KindReject, Reason: floodgate.ReasonMaxWait},
	qDeadline:    {Kind: floodgate.KindReject, Reason: floodgate.ReasonDeadline},
	qTooLarge:    {Kind: floodgate.KindReject, Reason: floodgate.ReasonTooLarge},
	qUnavailable: {Kind: floodgate.KindReject, Reason: floodgate.ReasonUnavailable, Source: floodgate.SourceFailClosed},
	qClosed:      {Kind: floodgate.KindReject, Reason: floodgate.ReasonClosed},
	qCanceled:    {Kind: floodgate.KindCancel},
	qErrors:      {Kind: floodgate.KindReject, Reason: floodgate.ReasonError},
}

// observe tells the Observer of one Wait of weight n, counted as i, that
// waited for a slot reserved waited away and returned err.
func (q *Queue) observe(i int, n int64, waited time.Duration, err error) {
	e := queueEvents[i]
	e.Component, e.N, e.Duration, e.Err = floodgate.ComponentQueue, n, waited, err
	q.obs.Observe(e)
}
