package distsem_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// shape is what an event says, without its times and errors: Duration and
// Err are checked apart.
type shape struct {
	kind   floodgate.Kind
	n      int64
	reason floodgate.Reason
	source floodgate.Source
	waited bool // Duration > 0
}

func shapes(t *testing.T, ev []floodgate.Event) []shape {
	t.Helper()
	out := make([]shape, len(ev))
	for i, e := range ev {
		if e.Component != floodgate.ComponentDistsem || e.Part != "" {
			t.Errorf("event %+v: Component %q Part %q, want distsem and no part", e, e.Component, e.Part)
		}
		if (e.Kind == floodgate.KindReject) != (e.Err != nil && e.Reason != "") {
			t.Errorf("event %+v: a reject has its Err and Reason, nothing else does", e)
		}
		out[i] = shape{e.Kind, e.N, e.Reason, e.Source, e.Duration > 0}
	}
	return out
}

// wantShapes checks the events rec was told since the last take, but for
// renewals, whose times are the schedule's: renewals(rec) checks those.
func wantShapes(t *testing.T, rec *observetest.Recorder, want []shape) {
	t.Helper()
	ev := slices.DeleteFunc(rec.Take(), func(e floodgate.Event) bool { return e.Kind == floodgate.KindRenew })
	if got := shapes(t, ev); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", got, want)
	}
}

// A Semaphore reports its grants (with the wait when the call queued), its
// refusals (not TryAcquire's ErrNoCapacity: a probe), cancellations,
// releases (with the hold time) and renewals.
func TestObserverEvents(t *testing.T) {
	db := redistest.Connect(t)
	rec := new(observetest.Recorder)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{Observer: rec, Lease: time.Second,
		Breaker: breaker.New("obs", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	ctx := t.Context()
	p, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("TryAcquire on a full semaphore = %v", err)
	}
	if _, err := s.Acquire(ctx, 3); !errors.Is(err, distsem.ErrTooLarge) {
		t.Fatalf("Acquire(ctx, 3) = %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := s.Acquire(dctx, 1); err != context.DeadlineExceeded {
		t.Fatalf("Acquire on a full semaphore until the deadline = %v", err)
	}
	cancel()
	wantShapes(t, rec, []shape{
		{kind: floodgate.KindAdmit, n: 2, source: floodgate.SourceStore},
		{kind: floodgate.KindReject, n: 3, reason: floodgate.ReasonTooLarge},
		{kind: floodgate.KindCancel, n: 1, waited: true},
	})

	// A renewal (every Lease/3) while held; then a waiter is handed the
	// weight when p is released.
	waitFor(t, 5*time.Second, "a renewal reported", func() bool { return rec.Has(floodgate.KindRenew) })
	for _, e := range rec.Take() {
		if e.Kind != floodgate.KindRenew || e.Err != nil || e.Component != floodgate.ComponentDistsem {
			t.Fatalf("event while the permit is held: %+v, want only successful renewals", e)
		}
	}
	got := make(chan *distsem.Permit)
	go func() {
		q, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		got <- q
	}()
	waitFor(t, 5*time.Second, "the waiter queued", func() bool { return stats(t, s).Waiting == 1 })
	p.Release(ctx)
	q := <-got
	q.Release(ctx)
	// The releases carry the hold time (waited), the waiter's grant its wait.
	wantShapes(t, rec, []shape{
		{kind: floodgate.KindRelease, n: 2, waited: true},
		{kind: floodgate.KindAdmit, n: 1, source: floodgate.SourceStore, waited: true},
		{kind: floodgate.KindRelease, n: 1, waited: true},
	})
}

// A lost lease is a KindLeaseLost with the weight and ErrLeaseLost, and no
// KindRelease follows it.
func TestObserverLeaseLost(t *testing.T) {
	db := redistest.Connect(t)
	rec := new(observetest.Recorder)
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{Observer: rec, Lease: 600 * time.Millisecond,
		Breaker: breaker.New("lost", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	ctx := t.Context()
	p, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Client.Del(ctx, s.Keys()...).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost within 5s of the permit vanishing from Redis")
	}
	// Lost is closed under the permit's lock; the event follows it, without.
	waitFor(t, 5*time.Second, "the loss reported", func() bool { return rec.Has(floodgate.KindLeaseLost) })
	p.Release(ctx)
	ev := rec.Take()
	var lost []floodgate.Event
	for _, e := range ev {
		switch e.Kind {
		case floodgate.KindLeaseLost:
			lost = append(lost, e)
		case floodgate.KindRelease:
			t.Errorf("a lost permit's Release reported %+v", e)
		}
	}
	if len(lost) != 1 || lost[0].N != 1 || !errors.Is(lost[0].Err, distsem.ErrLeaseLost) || lost[0].Component != floodgate.ComponentDistsem {
		t.Fatalf("lease-lost events %+v, want one of weight 1 with ErrLeaseLost", lost)
	}
}

// With Redis unreachable, each policy's answers carry its Source: permits
// granted by FailOpen and FailLocal, FailLocal's refusal when its share is
// used up (ErrLocalBusy), FailClosed's ErrUnavailable.
func TestObserverDegradedSources(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	ctx := t.Context()
	for _, c := range []struct {
		policy breaker.Policy
		want   []shape
	}{
		{breaker.FailOpen, []shape{
			{kind: floodgate.KindAdmit, n: 1, source: floodgate.SourceFailOpen},
			{kind: floodgate.KindAdmit, n: 1, source: floodgate.SourceFailOpen},
		}},
		{breaker.FailLocal, []shape{
			{kind: floodgate.KindAdmit, n: 1, source: floodgate.SourceFailLocal},
			{kind: floodgate.KindReject, n: 1, reason: floodgate.ReasonNoCapacity, source: floodgate.SourceFailLocal},
		}},
		{breaker.FailClosed, []shape{
			{kind: floodgate.KindReject, n: 1, reason: floodgate.ReasonUnavailable, source: floodgate.SourceFailClosed},
			{kind: floodgate.KindReject, n: 1, reason: floodgate.ReasonUnavailable, source: floodgate.SourceFailClosed},
		}},
	} {
		rec := new(observetest.Recorder)
		brk := breaker.New("dead", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		s := newSem(t, dead, "dead", 5, distsem.Config{Observer: rec, Breaker: brk, Policy: c.policy, LocalShare: 1})
		for range 2 { // the first call fails at the store, the second finds the breaker open
			if p, err := s.TryAcquire(ctx, 1); err == nil {
				defer p.Release(ctx)
			}
		}
		if got := shapes(t, rec.Take()); !slices.Equal(got, c.want) {
			t.Errorf("%v: events\n got %+v\nwant %+v", c.policy, got, c.want)
		}
	}
}

// A Keyed reports as its keys' Semaphores do (TryHold finding no room is not
// an event), and its own refusals too (a new key beyond MaxKeys, an invalid
// key), never with the key.
func TestKeyedObserverEvents(t *testing.T) {
	db := redistest.Connect(t)
	rec := new(observetest.Recorder)
	k := newKeyed(t, db.Client, db.Prefix+"k:", 1, distsem.KeyedConfig{MaxKeys: 1, Config: distsem.Config{Observer: rec}})
	ctx := t.Context()
	h, err := k.Hold(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	k.TryHold(ctx, "a", 1)
	k.Hold(ctx, "b", 1)
	k.Hold(ctx, "", 1)
	h.Release()
	wantShapes(t, rec, []shape{
		{kind: floodgate.KindAdmit, n: 1, source: floodgate.SourceStore},
		{kind: floodgate.KindReject, n: 1, reason: floodgate.ReasonTooManyKeys},
		{kind: floodgate.KindReject, n: 1, reason: floodgate.ReasonInvalidKey},
		{kind: floodgate.KindRelease, n: 1, waited: true},
	})
}
