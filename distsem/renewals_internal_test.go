package distsem

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The renewal schedule's tests run in a synctest bubble: its clock stands
// still while the test goroutine runs, so the schedule's timer (armed for due
// times after now) never fires under them unless they sleep.

// schedPermit returns a permit for the schedule tests. It is marked released,
// so that renewDue would do nothing if the timer ever reached it.
func schedPermit() *Permit { return &Permit{released: true} }

// checkSchedule fails t unless rs holds exactly the permits of want, each at
// its due time in want, as a binary min-heap whose permits know their slots,
// and unless every permit of all that is not in want has slot 0. It also
// checks that the timer fires no later than the head is due.
func checkSchedule(t *testing.T, rs *renewals, want map[*Permit]time.Time, all []*Permit) {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.heap) != len(want) {
		t.Fatalf("%d permits scheduled, want %d", len(rs.heap), len(want))
	}
	for i, p := range rs.heap {
		// A permit in two places would fail this for one of them.
		if p.slot != i+1 {
			t.Fatalf("heap[%d].slot = %d, want %d", i, p.slot, i+1)
		}
		if i > 0 && p.due.Before(rs.heap[(i-1)/2].due) {
			t.Fatalf("heap[%d] due before its parent heap[%d]", i, (i-1)/2)
		}
		due, ok := want[p]
		if !ok {
			t.Fatalf("heap[%d] is a permit that should not be scheduled", i)
		}
		if !p.due.Equal(due) {
			t.Fatalf("heap[%d] due at %v, want %v", i, p.due, due)
		}
	}
	for _, p := range all {
		if _, ok := want[p]; !ok && p.slot != 0 {
			t.Fatalf("unscheduled permit has slot %d, want 0", p.slot)
		}
	}
	if len(rs.heap) > 0 && (rs.armed.IsZero() || rs.armed.After(rs.heap[0].due)) {
		t.Fatalf("timer armed for %v (zero: not armed), after the head is due (%v)", rs.armed, rs.heap[0].due)
	}
}

// sortedDues returns the due times of want, in order: the reference schedule.
func sortedDues(want map[*Permit]time.Time) []time.Time {
	var ds []time.Time
	for _, d := range want {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, time.Time.Compare)
	return ds
}

// takeDue takes the permits due at now off rs, checks that they come in due
// order and are exactly the ones the reference has due at now, and removes
// them from the reference.
func takeDue(t *testing.T, rs *renewals, now time.Time, want map[*Permit]time.Time) {
	t.Helper()
	var wantDues []time.Time
	for _, d := range sortedDues(want) {
		if !d.After(now) {
			wantDues = append(wantDues, d)
		}
	}
	rs.mu.Lock()
	got := rs.takeDueLocked(now, nil)
	rs.mu.Unlock()
	if len(got) != len(wantDues) {
		t.Fatalf("took %d permits due at %v, want %d", len(got), now, len(wantDues))
	}
	for i, p := range got {
		if _, ok := want[p]; !ok {
			t.Fatalf("took a permit that was not scheduled")
		}
		if !p.due.Equal(wantDues[i]) {
			t.Fatalf("permit %d taken is due at %v, want %v (due order)", i, p.due, wantDues[i])
		}
		if p.slot != 0 {
			t.Fatalf("permit taken still has slot %d", p.slot)
		}
		delete(want, p)
	}
}

// TestRenewalsMatchSortedReference: random sequences of adds, moves, removes
// (of scheduled and unscheduled permits), remove-then-re-add (as renewDue and
// renew do) and takes of due permits keep the heap equal to a sorted reference
// and a valid heap after every operation.
func TestRenewalsMatchSortedReference(t *testing.T) {
	for seed := range uint64(4) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			var rs renewals
			base := time.Now()
			// Due times on a coarse grid, so that many are equal; all after
			// now, so that the timer never fires.
			due := func() time.Time { return base.Add(time.Duration(1+rng.IntN(200)) * 5 * time.Millisecond) }
			pool := make([]*Permit, 300)
			for i := range pool {
				pool[i] = schedPermit()
			}
			want := map[*Permit]time.Time{}
			for range 5_000 {
				p := pool[rng.IntN(len(pool))]
				switch op := rng.IntN(20); {
				case op < 8: // add, or move if scheduled
					d := due()
					rs.add(p, d)
					want[p] = d
				case op < 13: // remove, a no-op if not scheduled
					rs.remove(p)
					delete(want, p)
				case op < 17: // remove and add again at once
					rs.remove(p)
					d := due()
					rs.add(p, d)
					want[p] = d
				case op < 19: // add twice: the second add moves it
					d1, d2 := due(), due()
					rs.add(p, d1)
					rs.add(p, d2)
					want[p] = d2
				default:
					takeDue(t, &rs, due(), want)
				}
				checkSchedule(t, &rs, want, pool)
			}
			takeDue(t, &rs, base.Add(time.Hour), want)
			checkSchedule(t, &rs, want, pool)
		})
	}
}

// TestRenewalsTakeDueInDueOrder: the permits due at a time come off the heap
// in due order (equal due times included), and the rest stay on it.
func TestRenewalsTakeDueInDueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		var rs renewals
		base := time.Now()
		pool := make([]*Permit, 2000)
		want := map[*Permit]time.Time{}
		for i := range pool {
			pool[i] = schedPermit()
			d := base.Add(time.Duration(1+rng.IntN(100)) * time.Millisecond)
			rs.add(pool[i], d)
			want[pool[i]] = d
		}
		checkSchedule(t, &rs, want, pool)
		n := len(want)
		takeDue(t, &rs, base.Add(50*time.Millisecond), want)
		if len(want) == 0 || len(want) == n {
			t.Fatalf("%d of %d left after the first take: the cut should split them", len(want), n)
		}
		checkSchedule(t, &rs, want, pool)
		takeDue(t, &rs, base.Add(time.Hour), want)
		checkSchedule(t, &rs, want, pool)
	})
}

// TestRenewalsWorkIsLogarithmic: adding, moving and removing a permit on a
// heap of n permits changes the place of at most log2(n)+2 of them, for n up
// to 16384, on the worst cases (a new head, a head moved to the end, removals
// from the middle). A schedule that shifted permits to insert in order (O(n)
// per insertion: what made a Redis blip quadratic) changes thousands. Counted,
// not timed.
func TestRenewalsWorkIsLogarithmic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rs renewals
		far := time.Now().Add(time.Hour)
		var all []*Permit
		moved := func(op func()) int {
			before := make([]int, len(all))
			for i, p := range all {
				before[i] = p.slot
			}
			op()
			n := 0
			for i, p := range all {
				if p.slot != before[i] {
					n++
				}
			}
			return n
		}
		const size = 1 << 14
		for n := 1; n <= size; n++ {
			// Each new permit is due before all others: it rises to the root.
			p := schedPermit()
			all = append(all, p)
			due := far.Add(-time.Duration(n) * time.Millisecond)
			if n&(n-1) != 0 {
				rs.add(p, due)
				continue
			}
			bound := bits.Len(uint(n)) + 2
			check := func(what string, op func()) {
				t.Helper()
				if m := moved(op); m > bound {
					t.Errorf("n=%d: %s changed the place of %d permits, want ≤ %d", n, what, m, bound)
				}
			}
			check("an add of a new head", func() { rs.add(p, due) })
			if n < 4 {
				continue
			}
			head := rs.heap[0]
			check("a move of the head to the end", func() { rs.add(head, far.Add(time.Hour)) })
			mid := rs.heap[n/2]
			check("a removal from the middle", func() { rs.remove(mid) })
			check("a re-add as the head", func() { rs.add(mid, due.Add(-time.Microsecond)) })
		}
		want := map[*Permit]time.Time{}
		for _, p := range rs.heap {
			want[p] = p.due
		}
		checkSchedule(t, &rs, want, all)
		if len(want) != size {
			t.Fatalf("%d permits scheduled, want %d", len(want), size)
		}
	})
}

// lostNow reports whether p was lost.
func lostNow(p *Permit) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isLost
}

// TestRenewalsTimerFiresForHead: the timer follows the head as permits are
// added in reverse order and the head is removed, and a fire takes every
// permit due at once. The permits are due at their local deadlines, where
// renewDue loses them: losses show when each was taken.
func TestRenewalsTimerFiresForHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Semaphore{hub: &hub{}}
		start := time.Now()
		at := func(d time.Duration) *Permit {
			p := &Permit{s: s, kind: permitRedis, deadline: start.Add(d)}
			s.renewals.add(p, p.deadline)
			return p
		}
		// Each add is a new head, due before the timer fires.
		p300 := at(300 * time.Millisecond)
		p200a := at(200 * time.Millisecond)
		p200b := at(200 * time.Millisecond)
		p100 := at(100 * time.Millisecond)
		gone := at(50 * time.Millisecond)
		s.renewals.remove(gone) // the timer, armed for it, fires early
		order := []*Permit{p100, p200a, p200b, p300}
		steps := []struct {
			at   time.Duration
			lost int // how many of order are lost by then
		}{
			{50 * time.Millisecond, 0},
			{99 * time.Millisecond, 0},
			{100 * time.Millisecond, 1},
			{199 * time.Millisecond, 1},
			{200 * time.Millisecond, 3},
			{300 * time.Millisecond, 4},
		}
		for _, st := range steps {
			time.Sleep(time.Until(start.Add(st.at)))
			synctest.Wait()
			for i, p := range order {
				if got, want := lostNow(p), i < st.lost; got != want {
					t.Errorf("at %v: permit due at %v lost = %v, want %v", st.at, p.deadline.Sub(start), got, want)
				}
			}
		}
		if lostNow(gone) {
			t.Error("a permit removed from the schedule was lost")
		}
		if n := s.lost.Load(); n != 4 {
			t.Errorf("Semaphore counted %d lost permits, want 4", n)
		}
		checkSchedule(t, &s.renewals, map[*Permit]time.Time{}, append(order, gone))
	})
}

// TestRenewDueSkipsRescheduledPermit: between the timer taking a permit off
// the schedule and renewDue running, the permit's renewal in flight can
// return and schedule it again (with a new deadline after a success).
// renewDue then leaves it to that entry: it neither renews it again nor judges
// it by the deadline it had. The permit here is past its deadline, so that a
// renewDue that went on would lose it (and start no renewal call).
func TestRenewDueSkipsRescheduledPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Semaphore{hub: &hub{}}
		p := &Permit{s: s, kind: permitRedis, deadline: time.Now()}
		due := time.Now().Add(time.Second)
		s.renewals.add(p, due)
		p.renewDue()
		if lostNow(p) {
			t.Fatal("renewDue lost a permit that is back on the schedule")
		}
		checkSchedule(t, &s.renewals, map[*Permit]time.Time{p: due}, []*Permit{p})
		s.renewals.remove(p)
	})
}
