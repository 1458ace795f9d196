package shaper

import (
	"testing"
	"time"
)

// TestCancelRaceBatchGiveBack: a waiter released in a batch whose context ended at
// the same instant gives its slot back; the schedule is recomputed from before the
// batch over the other members only.
func TestCancelRaceBatchGiveBack(t *testing.T) {
	q := NewQueue(PerSecond(5), Config{}) // T = 200ms
	const T = int64(200 * time.Millisecond)
	a := &waiter{cost: 1, arrival: 0}
	b := &waiter{cost: 2, arrival: 0}
	c := &waiter{cost: 1, arrival: 0}
	q.batchSeq = 7
	q.batchTat = vtime{ns: 1000}
	for _, w := range []*waiter{a, b, c} {
		w.state, w.batch = granted, 7
	}
	q.batch = []*waiter{a, b, c}
	q.tat = vtime{ns: 1000 + 4*T}
	q.stats.Released = 3

	q.giveBackLocked(b)
	if want := (vtime{ns: 1000 + 2*T}); q.tat != want {
		t.Errorf("tat after giving back b = %v, want %v", q.tat, want)
	}
	if len(q.batch) != 2 || q.batch[0] != a || q.batch[1] != c || q.stats.Released != 2 {
		t.Errorf("batch = %v, released %d; want [a c], 2", q.batch, q.stats.Released)
	}

	// A waiter from an older batch cannot give back: later items used its slot.
	old := &waiter{cost: 1, state: granted, batch: 6}
	q.giveBackLocked(old)
	if want := (vtime{ns: 1000 + 2*T}); q.tat != want {
		t.Errorf("tat after an old give-back = %v, want unchanged %v", q.tat, want)
	}
}

// TestVtimeExact: the schedule keeps fractions of a nanosecond exactly: three
// million items at 3/s end exactly one million seconds later.
func TestVtimeExact(t *testing.T) {
	q := NewQueue(Rate{Count: 3, Period: time.Second}, Config{})
	v := vtime{}
	for range 3_000_000 {
		v = q.after(v, 1)
	}
	if v != (vtime{ns: int64(time.Second) * 1_000_000}) {
		t.Errorf("3e6 items at 3/s end at %v, want exactly 1e6 s", v)
	}
}
