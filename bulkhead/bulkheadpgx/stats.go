package bulkheadpgx

import (
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Buckets are the upper bounds of the wait and hold time histograms in
// ClassStats; a last bucket counts everything longer.
var Buckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// A Histogram counts durations: Counts[i] those up to Buckets[i] (and above
// Buckets[i-1]), Counts[len(Buckets)] those above the last bound.
type Histogram struct {
	Count  uint64
	Sum    time.Duration
	Counts [len(Buckets) + 1]uint64
}

type histogram struct {
	count, sum atomic.Uint64
	counts     [len(Buckets) + 1]atomic.Uint64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(Buckets) && d > Buckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(max(d, 0)))
	h.count.Add(1)
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Count: h.count.Load(), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

type counters struct {
	calls, admitted                     atomic.Uint64
	maxWait, tooLarge, canceled, errors atomic.Uint64
	inUse                               atomic.Int64
	waits                               gatewait.Waits // Waiting: calls waiting for the gate
	wait, hold                          histogram
}

// ClassStats is a snapshot of one class's counters. For an unlimited class
// only Calls is counted: tracking more would mean wrapping its results.
type ClassStats struct {
	Name  string
	Calls uint64 // calls made in the class, refused ones included
	// InUse is the weight held by calls whose connection is not back yet
	// (see the package doc: a destroyed connection's weight comes back once
	// its cleanup is done). It is counted after the gate grants and before
	// the gate is given back, so it never reads above what the gate allows.
	InUse   int64
	Waiting int64 // calls waiting for the gate

	Admitted uint64 // calls granted the gate

	// Wait counts the waits of calls that did not get the gate at once:
	// those that waited for it (granted or not) and those refused at once,
	// as a wait of 0, whatever the MaxWait (every call asks the gate's
	// TryHold first; one granted there is not a wait). Hold is the time
	// from grant to release of every admitted call.
	Wait, Hold Histogram

	// Refusals by reason: ErrMaxWait (the class's MaxWait, or the gate's own
	// refusal), ErrTooLarge (the gate's), the caller's context ending before
	// the grant, and other gate failures (a store error, an invalid key).
	RejectedMaxWait  uint64
	RejectedTooLarge uint64
	Canceled         uint64
	Errors           uint64
}

// Stats is a snapshot of a DB: its classes in Config order (the added default
// class last), and the pool's own statistics (acquire counts and durations,
// connections) beside them.
type Stats struct {
	Classes []ClassStats
	Pool    *pgxpool.Stat
}

// Stats returns the classes' counters and the pool's Stat.
func (db *DB) Stats() Stats {
	s := Stats{Classes: make([]ClassStats, len(db.order)), Pool: db.pool.Stat()}
	for i, c := range db.order {
		s.Classes[i] = c.Stats()
	}
	return s
}

// Stats returns the class's counters.
func (c *ClassDB) Stats() ClassStats {
	return ClassStats{
		Name:             c.name,
		Calls:            c.st.calls.Load(),
		InUse:            c.st.inUse.Load(),
		Waiting:          c.st.waits.Waiting.Load(),
		Admitted:         c.st.admitted.Load(),
		Wait:             c.st.wait.snapshot(),
		Hold:             c.st.hold.snapshot(),
		RejectedMaxWait:  c.st.maxWait.Load(),
		RejectedTooLarge: c.st.tooLarge.Load(),
		Canceled:         c.st.canceled.Load(),
		Errors:           c.st.errors.Load(),
	}
}
