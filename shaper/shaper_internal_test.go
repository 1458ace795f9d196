package shaper

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestCancelRaceBatchGiveBack: a waiter released in a batch whose context ended at
// the same instant gives its slot back; the schedule is recomputed from before the
// batch over the other members only.
func TestCancelRaceBatchGiveBack(t *testing.T) {
	q := NewQueue(PerSecond(5), QueueConfig{}) // T = 200ms
	const T = int64(200 * time.Millisecond)
	a := &waiter{n: 1, arrival: 0}
	b := &waiter{n: 2, arrival: 0}
	c := &waiter{n: 1, arrival: 0}
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
	old := &waiter{n: 1, state: granted, batch: 6}
	q.giveBackLocked(old)
	if want := (vtime{ns: 1000 + 2*T}); q.tat != want {
		t.Errorf("tat after an old give-back = %v, want unchanged %v", q.tat, want)
	}
}

// TestVtimeExact: the schedule keeps fractions of a nanosecond exactly: three
// million items at 3/s end exactly one million seconds later.
func TestVtimeExact(t *testing.T) {
	q := NewQueue(Rate{Count: 3, Period: time.Second}, QueueConfig{})
	v := vtime{}
	for range 3_000_000 {
		v = q.after(v, 1)
	}
	if v != (vtime{ns: int64(time.Second) * 1_000_000}) {
		t.Errorf("3e6 items at 3/s end at %v, want exactly 1e6 s", v)
	}
}

// TestIdleKeysEvicted: keys whose state is back to fresh are swept once a shard has
// doubled, so memory follows the keys active at once, not every key ever seen.
func TestIdleKeysEvicted(t *testing.T) {
	m := NewMeter(Limit{Rate: PerSecond(10), Burst: 1}) // idle 100ms after use
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 200_000
	for i := range n {
		m.AllowNAt("old:"+itoa(i), t0, 1)
	}
	if got := m.c.(*core[gcraState, gcraAlgo, *gcraAlgo]).st.len(); got < n/2 {
		t.Fatalf("%d keys stored before they went idle, want ~%d", got, n)
	}
	// A second of new keys later, the old ones are idle and get swept.
	for i := range n {
		m.AllowNAt("new:"+itoa(i), t0.Add(time.Second), 1)
	}
	if got := m.c.(*core[gcraState, gcraAlgo, *gcraAlgo]).st.len(); got > n+n/2 {
		t.Errorf("%d keys stored after the old ones went idle, want ≤ %d", got, n+n/2)
	}
	// An evicted key answers as a fresh one.
	if d, _ := m.AllowNAt("old:1", t0.Add(time.Second), 1); !d.Allowed {
		t.Errorf("an evicted idle key was denied")
	}
	// A live key is never evicted: the new keys are still within their interval.
	if d, _ := m.AllowNAt("new:1", t0.Add(time.Second+50*time.Millisecond), 1); d.Allowed {
		t.Errorf("a live key was forgotten")
	}
}

func TestSlidingLogBufferBounded(t *testing.T) {
	m := NewSlidingLog(Limit{Rate: Rate{Count: 5, Period: time.Second}})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		m.AllowNAt("k", t0.Add(time.Duration(i)*time.Millisecond), 1)
	}
	sh, tag := m.c.(*core[slState, slAlgo, *slAlgo]).st.locate("k")
	if s := sh.lookupLocked("k", tag); len(s.ring) > 5 {
		t.Errorf("ring capacity %d, want ≤ Count 5", len(s.ring))
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// TestPeekDoesNotStore: a zero-cost call on an unknown key reports a fresh state
// and stores nothing; a denied call stores nothing new either.
func TestPeekDoesNotStore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMeter(Limit{Rate: PerSecond(1)})
	d, err := m.AllowNAt("ghost", t0, 0)
	if err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("peek = %+v, %v; want allowed with 1 remaining", d, err)
	}
	if n := m.c.(*core[gcraState, gcraAlgo, *gcraAlgo]).st.len(); n != 0 {
		t.Errorf("%d keys stored after a peek, want 0", n)
	}
	if _, err := m.AllowNAt("big", t0, 2); err == nil {
		t.Errorf("cost above burst: no error")
	}
	if n := m.c.(*core[gcraState, gcraAlgo, *gcraAlgo]).st.len(); n != 0 {
		t.Errorf("%d keys stored after a never-allowed call, want 0", n)
	}
}

// TestShardIsTwoCacheLines: shards do not share cache lines (the store puts them
// first in every meter, which the allocator aligns to 64 bytes).
func TestShardIsTwoCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(shard[gcraState]{}); n != 128 {
		t.Errorf("shard is %d bytes, want 128", n)
	}
	// tat, rem and last (the admission time that caps a lowered limit's debt).
	if n := unsafe.Sizeof(slot[gcraState]{}); n != 56 {
		t.Errorf("GCRA slot is %d bytes, want 56", n)
	}
}

// TestStoreKeys: keys of every length, inline and long, survive rebuilds (growth
// and sweeps) with their own state, and the store never keeps the caller's bytes.
func TestStoreKeys(t *testing.T) {
	m := NewFixedWindow(Limit{Rate: PerMinute(3)})
	t0 := time.UnixMicro(t0US)
	buf := make([]byte, 64)
	key := func(i int) string {
		n := copy(buf, "k"+itoa(i)+strings.Repeat("x", i%50))
		return unsafe.String(&buf[0], n) // reused: the store must copy it
	}
	const n = 5000
	for i := range n {
		if d, _ := m.AllowNAt(key(i), t0, 1+int64(i%3)); !d.Allowed {
			t.Fatalf("first call of key %d denied", i)
		}
	}
	if got := m.c.(*core[fwState, fwAlgo, *fwAlgo]).st.len(); got != n {
		t.Fatalf("%d keys stored, want %d", got, n)
	}
	long := map[string]bool{}
	for i := range m.c.(*core[fwState, fwAlgo, *fwAlgo]).st.shards {
		for _, k := range m.c.(*core[fwState, fwAlgo, *fwAlgo]).st.shards[i].long {
			long[k] = true
		}
	}
	for i := range n {
		if k := key(i); len(k) > inlineKey && !long[k] {
			t.Fatalf("long key %q not stored as itself", k)
		}
	}
	for i := range n {
		want := 3 - 1 - int64(i%3)
		if d, _ := m.AllowNAt(key(i), t0, 0); d.Remaining != want {
			t.Fatalf("key %d (%d bytes): remaining %d, want %d", i, len(key(i)), d.Remaining, want)
		}
	}
	// A minute later every key is idle: inserting new ones rebuilds the tables
	// without them.
	for i := range n {
		m.AllowNAt("new"+itoa(i), t0.Add(time.Minute), 1)
	}
	if got := m.c.(*core[fwState, fwAlgo, *fwAlgo]).st.len(); got >= 2*n {
		t.Errorf("%d keys stored after the first %d went idle, want fewer than %d", got, n, 2*n)
	}
	for i := range n {
		if d, _ := m.AllowNAt(key(i), t0.Add(time.Minute), 0); d.Remaining != 3 {
			t.Fatalf("idle key %d: remaining %d, want 3", i, d.Remaining)
		}
		if d, _ := m.AllowNAt("new"+itoa(i), t0.Add(time.Minute), 0); d.Remaining != 2 {
			t.Fatalf("live key new%d: remaining %d, want 2", i, d.Remaining)
		}
	}
}

// TestDecisionStays64Bytes: the refund stamp sits in the padding that moving
// Degraded next to Allowed freed: a Decision, returned by value on every
// call, is still one cache line.
func TestDecisionStays64Bytes(t *testing.T) {
	if n := unsafe.Sizeof(Decision{}); n != 64 {
		t.Errorf("Decision is %d bytes, want 64", n)
	}
}

// TestLatenessCreditOutlivesCallerGap: a wake-up that comes late leaves a
// credit of its lateness. A caller arriving within the credit continues the
// schedule; one arriving further behind within maxLag of the late wake-up
// loses only its own time away, not the lateness (at 1M/s a loop whose own
// work between calls takes over one interval lost every late wake-up whole);
// after maxLag without a late wake-up the schedule restarts at now.
func TestLatenessCreditOutlivesCallerGap(t *testing.T) {
	const T = int64(time.Millisecond) // the interval at 1000/s
	const late = 300 * int64(time.Microsecond)
	// lateWake returns a Queue whose waiter due at 10T was released late, at
	// 10T+late: the schedule is at 11T with a credit of late.
	lateWake := func() *Queue {
		q := NewQueue(PerSecond(1000), QueueConfig{})
		q.tat = vtime{ns: 10 * T}
		q.waiters = []*waiter{{n: 1, slot: 10 * T, end: vtime{ns: 11 * T}, ready: make(chan struct{})}}
		q.releaseDueLocked(10*T + late)
		if q.tat != (vtime{ns: 11 * T}) || q.lag != late {
			t.Fatalf("after the late release: tat %v, lag %d; want 11T, %d", q.tat, q.lag, late)
		}
		return q
	}
	for _, tc := range []struct {
		name     string
		arrive   int64 // the caller's next two arrivals (the second at once)
		nextSlot int64 // the second arrival's slot
	}{
		// Within the credit: the schedule goes on from 11T.
		{"within the credit", 11*T + 200*int64(time.Microsecond), 12 * T},
		// 2T of the caller's own time after resuming: behind by more than
		// the credit; the schedule restarts at now-late, not at now.
		{"behind, credit fresh", 12*T + late, 13 * T},
		// maxLag after the late wake-up: idle, restart at now.
		{"behind, credit stale", 10*T + late + maxLag + T, 10*T + late + maxLag + 2*T},
	} {
		q := lateWake()
		if _, _, due := q.slotLocked(tc.arrive, 1); !due {
			t.Errorf("%s: the first arrival at %v is not due", tc.name, time.Duration(tc.arrive))
		}
		slot, _, due := q.slotLocked(tc.arrive, 1)
		if due || slot != tc.nextSlot {
			t.Errorf("%s: the second arrival at %v: slot %v (due %v), want %v", tc.name,
				time.Duration(tc.arrive), time.Duration(slot), due, time.Duration(tc.nextSlot))
		}
	}
}
