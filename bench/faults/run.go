package main

import (
	"context"
	"fmt"
	"time"
)

// result is one scenario's outcome.
type result struct {
	sc    scenario
	tl    timeline
	rate  *rateStats // rate subjects
	gate  *gateStats // gate subjects
	notes []string
	took  time.Duration
	// loadStart and loadEnd are the 1-minute load average when the scenario
	// began and ended: the machine is shared, and a busy one slows every call.
	loadStart, loadEnd string
	stall              time.Duration // the program's longest scheduling stall in the run (see stallWatch)
}

// runScenario runs sc on servers of its own under dir.
func runScenario(ctx context.Context, sc scenario, p params, bin, dir string, cal *calendar) (*result, error) {
	start := time.Now()
	e, err := newEnv(ctx, sc, p, bin, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sc.name(), err)
	}
	defer e.close()
	e.cal = cal
	res := &result{sc: sc, loadStart: loadAvg1()}
	if sc.subj.gate() {
		err = runGate(ctx, e, res)
	} else {
		err = runRate(ctx, e, res)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sc.name(), err)
	}
	res.notes = append(res.notes, e.notes...)
	res.took, res.loadEnd = time.Since(start), loadAvg1()
	return res, nil
}

// drive runs the main load from t0 (the next whole second) through the
// fault (from p.warm after t0, or later, see calendar) until the end of
// the recovery phase (a whole second), calling run
// with the load's context and start and injecting the fault meanwhile. It
// returns the timeline once the load's arrivals have stopped.
func drive(ctx context.Context, e *env, run func(ctx context.Context, t0 time.Time)) (timeline, error) {
	var tl timeline
	tl.t0 = nextSecond(time.Now(), 50*time.Millisecond)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(lctx, tl.t0)
	}()
	defer func() { stop(); <-done }()
	if e.sc.fault == steady {
		tl.end = tl.t0.Add(e.p.steadyFor)
	} else {
		// The fault begins in the middle of a window, after the warm-up, and
		// so that Redis returns apart from other runs' (see calendar).
		tl.faultAt = e.cal.faultStart(tl.t0.Add(e.p.warm+time.Second/2), e.p.faultLength(e.sc.fault))
		sleepUntil(ctx, tl.faultAt)
		tl.faultAt = time.Now()
		ret, err := e.inject(ctx)
		if err != nil {
			return tl, err
		}
		tl.returnAt = ret
		tl.end = nextSecond(ret.Add(e.p.recovery), 0)
	}
	sleepUntil(ctx, tl.end)
	return tl, ctx.Err()
}

// far is the end of a load that drive stops.
const far = time.Hour

func runRate(ctx context.Context, e *env, res *result) error {
	load := &rateLoad{procs: newRateProcs(e)}
	e.connect(ctx)
	// A calibration is a check of the key's state, to be read from Redis: one
	// with an answer not from Redis (a breaker still open, a call that timed
	// out on this busy machine) is run again, up to twice, and said so.
	calibrate := func(what string) []rateRec {
		for try := 0; ; try++ {
			w := nextSecond(time.Now(), 50*time.Millisecond)
			load.run(ctx, w, w.Add(time.Second), 3*e.p.rate)
			recs := load.wait()
			_, other := calibration(recs)
			if other == 0 || try == 2 || ctx.Err() != nil {
				return recs
			}
			e.notes = append(e.notes, fmt.Sprintf("calibration %s run again: %d of %d answers not from Redis", what, other, len(recs)))
			sleepCtx(ctx, 1100*time.Millisecond) // refill a GCRA burst again
		}
	}
	pre := calibrate("before the run")
	lctx, stopLedger := context.WithCancel(ctx)
	carried := watchLedger(lctx, len(load.procs), func(i int) int64 {
		if c := load.procs[i].carried; c != nil {
			return c()
		}
		return 0
	})
	defer func() { stopLedger(); carried() }() // (an early return's: the sampler stops with its owner)
	tl, err := drive(ctx, e, func(lctx context.Context, t0 time.Time) {
		load.run(lctx, t0, t0.Add(far), e.p.rate)
	})
	if err != nil {
		return err
	}
	recs := load.wait()
	stopLedger()
	led := carried()
	// A second idle refills a GCRA burst, as before the first calibration.
	sleepCtx(ctx, 1100*time.Millisecond)
	post := calibrate("after the run")
	st := measureRate(recs, pre, post, led, tl, e.p, e.sc.subj, e.sc.policy)
	res.tl, res.rate = tl, &st
	return ctx.Err()
}

func runGate(ctx context.Context, e *env, res *result) error {
	sems := gateProcs(e)
	defer func() {
		for _, s := range sems {
			s.Close()
		}
	}()
	load := &gateLoad{sems: sems, brs: e.brs, p: e.p}
	e.connect(ctx)
	lctx, stopLedger := context.WithCancel(ctx)
	uncarried := watchLedger(lctx, len(sems), func(i int) int64 { return sems[i].LocalStats().Uncarried })
	defer func() { stopLedger(); uncarried() }()
	tl, err := drive(ctx, e, func(lctx context.Context, t0 time.Time) {
		load.run(lctx, t0, t0.Add(far))
	})
	if err != nil {
		return err
	}
	recs := load.wait()
	stopLedger()
	led := uncarried()
	check := load.check(ctx)
	st := measureGate(recs, led, tl, e.p, e.sc.policy, check)
	res.tl, res.gate = tl, &st
	return ctx.Err()
}
