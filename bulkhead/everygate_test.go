package bulkhead_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
)

// oneKey is what an application writes to give a KeyedGate to a consumer
// that takes a Gate (bulkhead.Workers): every call holds weight of one key.
// (Workers has no per-job key; a per-tenant cap on jobs is a Workers, or a
// class, per tenant.)
type oneKey struct {
	g   floodgate.KeyedGate
	key string
}

func (o oneKey) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	return o.g.Hold(ctx, o.key, n)
}

func (o oneKey) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	return o.g.TryHold(ctx, o.key, n)
}

// gateCase is one of the five gates, as a bulkhead layer and as a Workers'
// Gate.
type gateCase struct {
	name  string
	gate  floodgate.Gate      // set for an unkeyed gate
	keyed floodgate.KeyedGate // set for a keyed one
	// noCapacity is the gate's refusal of a TryHold without room.
	noCapacity error
	// heldCtx reports whether ctx, the context fn ran under, was the Held's
	// own (distsem's is cancelled with ErrReleased once it is given back);
	// nil for a local gate, whose Held carries the request's context.
	heldCtx func(ctx context.Context) bool
}

const (
	everyLimit  = 2
	everyTenant = "acme"
)

func everyGate(t *testing.T) []gateCase {
	db := redistest.Connect(t)
	released := func(ctx context.Context) bool {
		return errors.Is(context.Cause(ctx), distsem.ErrReleased)
	}
	return []gateCase{
		{name: "semaphore.Weighted", gate: semaphore.New(everyLimit, semaphore.Config{}), noCapacity: semaphore.ErrNoCapacity},
		{name: "semaphore.Keyed", keyed: semaphore.NewKeyed(everyLimit, semaphore.KeyedConfig{}), noCapacity: semaphore.ErrNoCapacity},
		{name: "distsem.Semaphore", gate: distsem.New(db.Client, db.Key("every"), everyLimit, distsem.Config{}),
			noCapacity: distsem.ErrNoCapacity, heldCtx: released},
		{name: "distsem.Keyed", keyed: distsem.NewKeyed(db.Client, db.Key("every-keyed"), everyLimit, distsem.KeyedConfig{}),
			noCapacity: distsem.ErrNoCapacity, heldCtx: released},
		// Pinned (Min = Max) so that the cap the test checks is known; its
		// rounds and limit moves are adaptive's own tests.
		{name: "adaptive.Gate", gate: adaptive.New(adaptive.Config{Min: everyLimit, Max: everyLimit}), noCapacity: adaptive.ErrNoCapacity},
	}
}

// layer returns the gate as a bulkhead layer with maxWait, keyed by tenant
// for a keyed gate.
func (gc gateCase) layer(maxWait time.Duration) bulkhead.Layer {
	l := bulkhead.Layer{Name: "gate", Gate: gc.gate, MaxWait: maxWait}
	if gc.keyed != nil {
		l = bulkhead.Layer{Name: "gate", Key: bulkhead.ByTenant, KeyedGate: gc.keyed, MaxWait: maxWait}
	}
	return l
}

// asGate returns the gate as a floodgate.Gate (a keyed one through oneKey).
func (gc gateCase) asGate() floodgate.Gate {
	if gc.keyed != nil {
		return oneKey{gc.keyed, everyTenant}
	}
	return gc.gate
}

// wantFree checks that nothing of the gate is held or queued: the whole
// limit can be taken at once.
func (gc gateCase) wantFree(t *testing.T, when string) {
	t.Helper()
	h, err := gc.asGate().TryHold(t.Context(), everyLimit)
	if err != nil {
		t.Fatalf("%s: TryHold of the whole limit = %v, want nothing held", when, err)
	}
	h.Release()
}

// capCounter counts what runs at once and remembers the most.
type capCounter struct {
	running, most atomic.Int64
}

func (c *capCounter) enter() {
	n := c.running.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
}

func (c *capCounter) exit() { c.running.Add(-1) }

// TestEveryGateInEveryConsumer puts each of the five gates (semaphore.Weighted,
// semaphore.Keyed, distsem.Semaphore, distsem.Keyed, on real Redis, and
// adaptive.Gate) into a
// bulkhead layer and into a Workers, through the one gate contract:
//
//   - bulkhead: the cap holds (never more than the limit run, and the
//     requests beyond it wait and then run); with MaxWait < 0 a request
//     finding no room is refused at once with the gate's ErrNoCapacity
//     (Reason no_capacity) and a RetryAfter; with MaxWait > 0 it is refused
//     with ErrMaxWait (Reason max_wait) once the bound passes, leaving
//     nothing held or queued; a panicking fn gives its weight back; fn runs
//     under the Held's context (distsem's ends when it is released).
//   - Workers: the gate caps the jobs below the Workers' own limit, and
//     every permit is given back. A keyed gate goes in through a one-key
//     adapter (oneKey); Workers has no MaxWait (it waits for the gate until
//     Shutdown stops the dispatching) and lets a panicking job crash the
//     program, so those checks are bulkhead's alone.
func TestEveryGateInEveryConsumer(t *testing.T) {
	for _, gc := range everyGate(t) {
		t.Run(gc.name+"/bulkhead", func(t *testing.T) { testGateInBulkhead(t, gc) })
		t.Run(gc.name+"/workers", func(t *testing.T) { testGateInWorkers(t, gc) })
	}
}

func testGateInBulkhead(t *testing.T, gc gateCase) {
	waiting := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{gc.layer(0)}})
	never := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{gc.layer(-1)}})
	bounded := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{gc.layer(100 * time.Millisecond)}})
	// A bound, so that a weight never given back fails the test rather than
	// hanging it.
	tctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ctx := bulkhead.WithIdentity(tctx, bulkhead.Identity{Tenant: everyTenant})

	// Fill the gate with requests that hold it until release.
	var cc capCounter
	release := make(chan struct{})
	entered := make(chan context.Context, everyLimit)
	var wg sync.WaitGroup
	errs := make(chan error, 2*everyLimit+1)
	for range everyLimit {
		wg.Go(func() {
			errs <- waiting.Do(ctx, bulkhead.Request{}, func(ctx context.Context) error {
				cc.enter()
				defer cc.exit()
				entered <- ctx
				<-release
				return nil
			})
		})
	}
	var fnCtxs []context.Context
	for range everyLimit {
		fnCtxs = append(fnCtxs, <-entered)
	}

	// Full: MaxWait < 0 refuses at once with the gate's own refusal.
	err := never.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
	re, ok := errors.AsType[*bulkhead.RejectError](err)
	if !ok || !errors.Is(err, gc.noCapacity) || re.Reason != floodgate.ReasonNoCapacity || re.Layer != "gate" || re.RetryAfter() <= 0 {
		t.Errorf("MaxWait -1 on a full gate = %v (%+v), want a refusal by layer gate matching %v, no_capacity, RetryAfter > 0", err, re, gc.noCapacity)
	}
	// Full: MaxWait > 0 waits the bound, then refuses with ErrMaxWait.
	start := time.Now()
	err = bounded.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
	re, ok = errors.AsType[*bulkhead.RejectError](err)
	if !ok || !errors.Is(err, bulkhead.ErrMaxWait) || re.Reason != floodgate.ReasonMaxWait || time.Since(start) < 100*time.Millisecond {
		t.Errorf("MaxWait 100ms on a full gate = %v after %v, want ErrMaxWait (max_wait) after ≥ 100ms", err, time.Since(start))
	}

	// More requests than the limit, waiting (MaxWait 0): they run once the
	// holders are done, never more than the limit at once.
	for range everyLimit + 1 {
		wg.Go(func() {
			errs <- waiting.Do(ctx, bulkhead.Request{}, func(context.Context) error {
				cc.enter()
				defer cc.exit()
				time.Sleep(10 * time.Millisecond) // the work
				return nil
			})
		})
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("request through the gate: %v", err)
		}
	}
	if m := cc.most.Load(); m > everyLimit {
		t.Errorf("%d requests ran at once, want at most %d", m, everyLimit)
	}
	if gc.heldCtx != nil {
		for _, c := range fnCtxs {
			if !gc.heldCtx(c) {
				t.Errorf("fn's context after the request: cause %v, want the Held's, ended by its release", context.Cause(c))
			}
		}
	}
	gc.wantFree(t, "after the requests and the max wait")

	// A panic in fn gives the weight back.
	func() {
		defer func() {
			if r := recover(); r != "bug" {
				t.Errorf("recovered %v, want the panic", r)
			}
		}()
		waiting.Do(ctx, bulkhead.Request{}, func(context.Context) error { panic("bug") })
	}()
	gc.wantFree(t, "after a panic")
	for _, b := range []*bulkhead.Bulkhead{waiting, never, bounded} {
		if ls := layerStats(t, b, "gate"); ls.InFlight != 0 || ls.Waiting != 0 {
			t.Errorf("layer: InFlight %d, Waiting %d, want 0", ls.InFlight, ls.Waiting)
		}
	}
}

func testGateInWorkers(t *testing.T, gc gateCase) {
	w := bulkhead.NewWorkers(4*everyLimit, bulkhead.WorkersConfig{Gate: gc.asGate()})
	var cc capCounter
	release := make(chan struct{})
	entered := make(chan struct{}, everyLimit)
	const jobs = 3 * everyLimit
	for i := range jobs {
		err := w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{Run: func(context.Context) error {
			cc.enter()
			defer cc.exit()
			if i < everyLimit {
				entered <- struct{}{}
				<-release
			}
			time.Sleep(5 * time.Millisecond) // the work
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for range everyLimit {
		<-entered
	}
	// The gate is full while the Workers' own limit has room.
	if h, err := gc.asGate().TryHold(t.Context(), 1); !errors.Is(err, gc.noCapacity) {
		h.Release()
		t.Errorf("TryHold with %d jobs running = %v, want %v", everyLimit, err, gc.noCapacity)
	}
	close(release)
	if err := w.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := w.Stats().Classes[0]
	if st.Started != jobs || st.Finished != jobs || st.GateErrors != 0 {
		t.Errorf("stats %+v, want %d started and finished, no gate error", st, jobs)
	}
	if m := cc.most.Load(); m > everyLimit {
		t.Errorf("%d jobs ran at once, want at most %d (the gate's limit)", m, everyLimit)
	}
	gc.wantFree(t, "after Shutdown")
}
