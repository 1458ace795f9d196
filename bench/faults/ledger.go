package main

import (
	"context"
	"time"
)

// ledger is, per process, a figure the library keeps of what Redis was or
// was not told, sampled every ledgerEvery while the load runs, each change
// with when it was seen: a meter's Stats().Carried (the cost it carried
// into Redis after an outage), a Semaphore's LocalStats().Uncarried (the
// weight held that Redis does not count). The harness reads from them when
// Redis's accounting was whole again, which the callers' answers alone do
// not show.
type ledger [][]sample

type sample struct {
	t time.Time
	v int64
}

// ledgerEvery is the sampling interval: the error of a moment read from a
// ledger (late, never early).
const ledgerEvery = 5 * time.Millisecond

// watchLedger samples read(i) for each of n processes every ledgerEvery
// until ctx is done, keeping the first sample and every change; the
// returned function waits for the sampler to stop and returns the ledger.
func watchLedger(ctx context.Context, n int, read func(i int) int64) func() ledger {
	l := make(ledger, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ledgerEvery)
		defer t.Stop()
		for {
			now := time.Now()
			for i := range l {
				v := read(i)
				if k := len(l[i]); k == 0 || l[i][k-1].v != v {
					l[i] = append(l[i], sample{now, v})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() ledger { <-done; return l }
}

// at returns process i's value as last seen at or before t (0 before the
// first sample).
func (l ledger) at(i int, t time.Time) int64 {
	var v int64
	for _, s := range l[i] {
		if s.t.After(t) {
			break
		}
		v = s.v
	}
	return v
}

// rose returns when process i's value was first seen above its value at
// t, after t; ok false if it never was.
func (l ledger) rose(i int, t time.Time) (time.Time, bool) {
	v := l.at(i, t)
	for _, s := range l[i] {
		if s.t.After(t) && s.v > v {
			return s.t, true
		}
	}
	return time.Time{}, false
}

// backToZero returns when process i's value was last seen coming back to
// 0 (zero if it never was above 0), and whether it was still above 0 at its
// last sample.
func (l ledger) backToZero(i int) (back time.Time, stillUp bool) {
	for _, s := range l[i] {
		if s.v != 0 {
			stillUp = true
		} else if stillUp {
			stillUp, back = false, s.t
		}
	}
	return back, stillUp
}

// byWindow sums, over every process, each rise of its value by the whole
// Unix second it was seen in, less half a sampling interval (the middle of
// when it happened): a carry's cost by the window Redis charged it in.
func (l ledger) byWindow() map[int64]int64 {
	m := map[int64]int64{}
	for _, ss := range l {
		for k := 1; k < len(ss); k++ {
			if d := ss[k].v - ss[k-1].v; d > 0 {
				m[ss[k].t.Add(-ledgerEvery/2).Unix()] += d
			}
		}
	}
	return m
}
