package shaperredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// take returns the events rec was told since the last take, each with Err
// replaced by whether it was set (so that a test compares the rest field by
// field).
func take(rec *observetest.Recorder) (evs []floodgate.Event, errs []bool) {
	for _, e := range rec.Take() {
		errs = append(errs, e.Err != nil)
		e.Err = nil
		evs = append(evs, e)
	}
	return evs, errs
}

func wantEvents(t *testing.T, rec *observetest.Recorder, want []floodgate.Event) {
	t.Helper()
	got, errs := take(rec)
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
		if rejected := want[i].Kind == floodgate.KindReject && want[i].Reason != floodgate.ReasonLimited; errs[i] != rejected {
			t.Errorf("event %d: Err set %v, want %v", i, errs[i], rejected)
		}
	}
}

// TestMeterObserverAndStats: a Redis meter tells its Observer of each
// decision with where the answer came from, and counts the same in its
// Stats (shaper.MeterStats): store admissions and denials with Redis up;
// fail_open, fail_local and fail_closed answers with Redis unreachable;
// refusals before any round trip; nothing for a peek; and Refunded counts
// a refund that gave something back, not one that found nothing owed.
func TestMeterObserverAndStats(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	lim := shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1}
	rec := &observetest.Recorder{}
	m := shaperredis.NewMeter(db.Client, lim, shaperredis.Config{Prefix: db.Prefix, Observer: rec, MaxKeyLen: 8})
	d, _ := m.AllowN(ctx, "k", 1)
	m.AllowN(ctx, "k", 1)
	m.AllowN(ctx, "k", 0) // a peek: not observed
	m.AllowN(ctx, "k", 2)
	m.AllowN(ctx, "longer than eight", 1)
	meter := func(k floodgate.Kind, r floodgate.Reason, s floodgate.Source) floodgate.Event {
		return floodgate.Event{Kind: k, Component: floodgate.ComponentMeter, N: 1, Reason: r, Source: s}
	}
	tooLarge := meter(floodgate.KindReject, floodgate.ReasonTooLarge, "")
	tooLarge.N = 2
	wantEvents(t, rec, []floodgate.Event{
		meter(floodgate.KindAdmit, "", floodgate.SourceStore),
		meter(floodgate.KindReject, floodgate.ReasonLimited, floodgate.SourceStore),
		tooLarge,
		meter(floodgate.KindReject, floodgate.ReasonInvalidKey, ""),
	})
	if err := m.Refund(ctx, "k", 1, d); err != nil {
		t.Fatal(err)
	}
	if err := m.Refund(ctx, "k", 1, d); err != nil { // nothing left to give back
		t.Fatal(err)
	}
	if st := m.Stats(); st != (shaper.MeterStats{Allowed: 1, Denied: 1, TooLarge: 1, Refunded: 1, Store: 2, InvalidKey: 1}) {
		t.Errorf("Stats = %+v", st)
	}

	dead := deadClient()
	defer dead.Close()
	for _, tc := range []struct {
		policy breaker.Policy
		want   []floodgate.Event
		stats  shaper.MeterStats
	}{
		{breaker.FailOpen, []floodgate.Event{meter(floodgate.KindAdmit, "", floodgate.SourceFailOpen), meter(floodgate.KindAdmit, "", floodgate.SourceFailOpen)},
			shaper.MeterStats{Allowed: 2, FailOpen: 2}},
		{breaker.FailLocal, []floodgate.Event{meter(floodgate.KindAdmit, "", floodgate.SourceFailLocal), meter(floodgate.KindReject, floodgate.ReasonLimited, floodgate.SourceFailLocal)},
			shaper.MeterStats{Allowed: 1, Denied: 1, FailLocal: 2}},
		{breaker.FailClosed, []floodgate.Event{meter(floodgate.KindReject, floodgate.ReasonUnavailable, floodgate.SourceFailClosed), meter(floodgate.KindReject, floodgate.ReasonUnavailable, floodgate.SourceFailClosed)},
			shaper.MeterStats{FailClosed: 2}},
	} {
		m := shaperredis.NewMeter(dead, lim, shaperredis.Config{Policy: tc.policy, Observer: rec})
		m.AllowN(ctx, "k", 1)
		m.AllowN(ctx, "k", 1)
		wantEvents(t, rec, tc.want)
		if st := m.Stats(); st != tc.stats {
			t.Errorf("%v: Stats = %+v, want %+v", tc.policy, st, tc.stats)
		}
	}
}

// TestQueueAndLeaseObserver: a Redis queue tells its Observer (Config's) of
// each wait with its source and the sleep until its slot; a Lease tells the
// meter's Observer of each call, from leased tokens or refused.
func TestQueueAndLeaseObserver(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	rec := &observetest.Recorder{}
	q := shaperredis.NewQueue(db.Client, "obs", shaper.PerSecond(20), shaper.QueueConfig{MaxWait: 60 * time.Millisecond},
		shaperredis.Config{Prefix: db.Prefix, Observer: rec})
	defer q.Close()
	for range 2 {
		if err := q.Wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Wait(ctx, 2); !errors.Is(err, shaperredis.ErrTooLarge) {
		t.Fatalf("Wait above the burst: %v", err)
	}
	got, _ := take(rec)
	if len(got) != 3 || got[0].Kind != floodgate.KindAdmit || got[0].Source != floodgate.SourceStore || got[0].Duration != 0 ||
		got[1].Kind != floodgate.KindAdmit || got[1].Source != floodgate.SourceStore || got[1].Duration <= 0 || got[1].Duration > 50*time.Millisecond ||
		got[2].Kind != floodgate.KindReject || got[2].Reason != floodgate.ReasonTooLarge || got[2].N != 2 || got[2].Component != floodgate.ComponentQueue {
		t.Errorf("queue events %+v: want an admission at once, one after a sleep of ≤ 50ms, a too_large refusal of 2", got)
	}

	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(1), Burst: 4}, shaperredis.Config{Prefix: db.Prefix + "lease:", Observer: rec})
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 2, LowWater: 1})
	defer l.Close()
	for range 2 {
		if err := l.Wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	l.AllowN(3)
	got, _ = take(rec)
	var admits, rejects int
	for _, e := range got {
		switch {
		case e.Component != floodgate.ComponentLease:
			t.Errorf("lease event %+v: component", e)
		case e.Kind == floodgate.KindAdmit && e.Source == floodgate.SourceStore:
			admits++
		case e.Kind == floodgate.KindReject && e.Reason == floodgate.ReasonLimited && e.N == 3:
			rejects++
		}
	}
	if admits != 2 || rejects != 1 {
		t.Errorf("lease events %+v: want 2 admissions from the store and 1 refusal of 3", got)
	}
}
