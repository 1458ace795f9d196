package bulkheadpgx_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
)

type tenantKey struct{}

// tenant is a Class.Key: the tenant a middleware put in the context.
func tenant(ctx context.Context) string {
	s, _ := ctx.Value(tenantKey{}).(string)
	return s
}

// TestEveryGateInEveryConsumer puts each gate (semaphore.Weighted,
// semaphore.Keyed, distsem.Semaphore, distsem.Keyed, on real Redis, and
// adaptive.Gate with its limit held between equal bounds) into a
// class on real PostgreSQL, as they are, and checks what a class promises
// whatever its gate: concurrent queries that hold their rows open never hold
// more than the limit (for a keyed gate, of the call's key, while another
// key is not held back); with the gate full a never-waiting class refuses at
// once and a class with a positive MaxWait times out with ErrMaxWait, both
// holding nothing; closing the rows gives the weight back to the gate; the
// Observer sees every grant released.
func TestEveryGateInEveryConsumer(t *testing.T) {
	const limit = 2
	rdb := redistest.Connect(t)
	fleet := distsem.New(rdb.Client, rdb.Key("every"), limit, distsem.Config{})
	fleetKeyed := distsem.NewKeyed(rdb.Client, rdb.Key("every:"), limit, distsem.KeyedConfig{})
	t.Cleanup(func() { fleet.Close(); fleetKeyed.Close() })
	gates := []struct {
		name  string
		gate  floodgate.Gate
		keyed floodgate.KeyedGate
	}{
		{"semaphore.Weighted", semaphore.New(limit, semaphore.Config{}), nil},
		{"semaphore.Keyed", nil, semaphore.NewKeyed(limit, semaphore.KeyedConfig{})},
		{"distsem.Semaphore", fleet, nil},
		{"distsem.Keyed", nil, fleetKeyed},
		{"adaptive.Gate", adaptive.New(adaptive.Config{Min: limit, Max: limit}), nil}, // its limit held at 2
	}
	for _, g := range gates {
		t.Run(g.name, func(t *testing.T) {
			var admits, releases, rejects, badEvents atomic.Int64
			obs := floodgate.ObserverFunc(func(e floodgate.Event) {
				if e.Component != floodgate.ComponentDB || e.N != 1 ||
					(e.Part != "wait" && e.Part != "never" && e.Part != "bounded") {
					badEvents.Add(1)
				}
				switch e.Kind {
				case floodgate.KindAdmit:
					admits.Add(1)
				case floodgate.KindRelease:
					releases.Add(1)
				case floodgate.KindReject:
					if e.Reason != floodgate.ReasonMaxWait || !errors.Is(e.Err, bulkheadpgx.ErrMaxWait) {
						badEvents.Add(1)
					}
					rejects.Add(1)
				}
			})
			class := func(name string, maxWait time.Duration) bulkheadpgx.Class {
				c := bulkheadpgx.Class{Name: name, Gate: g.gate, KeyedGate: g.keyed, MaxWait: maxWait}
				if g.keyed != nil {
					c.Key = tenant
				}
				return c
			}
			const bound = 100 * time.Millisecond
			db := bulkheadpgx.New(pgtest.Pool(t, 12), bulkheadpgx.Config{Observer: obs, Classes: []bulkheadpgx.Class{
				class("wait", 0), class("never", -1), class("bounded", bound),
			}})
			wait, never, bounded := db.Class("wait"), db.Class("never"), db.Class("bounded")
			ctxA := context.WithValue(context.Background(), tenantKey{}, "a")
			ctxB := context.WithValue(context.Background(), tenantKey{}, "b")
			gate := gatewait.Keyed(g.gate, g.keyed)

			// The cap: 6 callers of tenant a, each holding its rows open until
			// told to read them and close them. The first limit open theirs,
			// the others wait; each close lets exactly one more in.
			const callers = 6
			var open, above, inUseAbove atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 5*callers) // room for every error a caller can send
			opened := make(chan struct{}, callers)
			done := make(chan struct{})
			for range callers {
				wg.Go(func() {
					rows, err := wait.Query(ctxA, "SELECT generate_series(1, 3)")
					if err != nil {
						errs <- err
						opened <- struct{}{}
						return
					}
					if open.Add(1) > limit {
						above.Add(1)
					}
					opened <- struct{}{}
					<-done
					for range 3 { // every row, without the Next that ends (and closes) them
						if !rows.Next() {
							errs <- fmt.Errorf("rows ended early: %v", rows.Err())
						}
					}
					open.Add(-1) // before Close: from Close on, another may open
					rows.Close()
					if err := rows.Err(); err != nil {
						errs <- err
					}
				})
			}
			stopSampling := make(chan struct{})
			var sampler sync.WaitGroup
			sampler.Go(func() {
				for {
					select {
					case <-stopSampling:
						return
					default:
					}
					if wait.Stats().InUse > limit {
						inUseAbove.Add(1)
					}
				}
			})
			for range limit {
				<-opened
			}
			waitFor(t, "the other callers waiting", func() bool { return wait.Stats().Waiting == callers-limit })
			if n := open.Load(); n != limit {
				t.Errorf("%d Rows open with the others waiting, want the limit %d", n, limit)
			}
			for i := range callers {
				done <- struct{}{} // one caller reads and closes its rows
				if i < callers-limit {
					<-opened // and one waiter opens its own
				}
			}
			wg.Wait()
			close(stopSampling)
			sampler.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("query through the class: %v", err)
			}
			if above.Load() > 0 || inUseAbove.Load() > 0 {
				t.Errorf("more than the limit %d held: %d opens above it, %d reads of InUse above it", limit, above.Load(), inUseAbove.Load())
			}
			if st := wait.Stats(); st.InUse != 0 || st.Admitted != callers || st.Hold.Count != callers {
				t.Errorf("after the rows were closed: %+v, want InUse 0, %d admitted and released", st, callers)
			}

			// The gate full: two Rows of tenant a left open.
			var held []pgx.Rows
			for range limit {
				rows, err := wait.Query(ctxA, "SELECT generate_series(1, 3)")
				if err != nil {
					t.Fatalf("Query to fill the gate: %v", err)
				}
				held = append(held, rows)
			}
			// Bounded, so that a call that waits fails the test instead of
			// hanging it.
			rctx, cancel := context.WithTimeout(ctxA, 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := never.Exec(rctx, "SELECT 1")
			if d := time.Since(start); !errors.Is(err, bulkheadpgx.ErrMaxWait) || d > 500*time.Millisecond {
				t.Errorf("never-waiting Exec with the gate full = %v after %v, want ErrMaxWait at once", err, d)
			}
			start = time.Now()
			_, err = bounded.Exec(rctx, "SELECT 1")
			d := time.Since(start)
			re, ok := errors.AsType[*bulkheadpgx.RejectError](err)
			if !errors.Is(err, bulkheadpgx.ErrMaxWait) || !ok || re.Layer != "bounded" || re.RetryAfter() <= 0 {
				t.Errorf("Exec with MaxWait %v and the gate full = %v (%+v), want a RejectError matching ErrMaxWait, Layer bounded, RetryAfter > 0", bound, err, re)
			}
			if d < bound-5*time.Millisecond || d > bound+400*time.Millisecond {
				t.Errorf("Exec with MaxWait %v refused after %v, want about %v", bound, d, bound)
			}
			for _, c := range []*bulkheadpgx.ClassDB{never, bounded} {
				if st := c.Stats(); st.InUse != 0 || st.Waiting != 0 || st.RejectedMaxWait != 1 {
					t.Errorf("class %s after its refusal: %+v, want InUse 0, Waiting 0, RejectedMaxWait 1", c.Name(), st)
				}
			}
			// Another tenant is held back only by an unkeyed gate.
			bctx, cancel := context.WithTimeout(ctxB, 5*time.Second)
			defer cancel()
			_, err = never.Exec(bctx, "SELECT 1")
			if g.keyed != nil && err != nil {
				t.Errorf("never-waiting Exec of tenant b with tenant a full = %v, want nil (a key of its own)", err)
			}
			if g.keyed == nil && !errors.Is(err, bulkheadpgx.ErrMaxWait) {
				t.Errorf("never-waiting Exec of tenant b with the unkeyed gate full = %v, want ErrMaxWait", err)
			}

			// Closing the rows gives the weight back: the whole limit is free
			// in the gate itself (a fleet gate drops the timed-out caller's
			// queued token in the background: looked for until it has).
			for _, rows := range held {
				rows.Close()
			}
			checkIdle(t, db)
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				h, err := gate.TryHold(context.Background(), "a", limit)
				if err == nil {
					h.Release()
					break
				}
				if time.Now().After(end) {
					t.Fatalf("TryHold(%d) on the gate after every call ended = %v, want the whole limit free", limit, err)
				}
			}
			if a, r := admits.Load(), releases.Load(); a != r || a < callers+2 {
				t.Errorf("Observer: %d admits, %d releases, want as many releases as admits (at least %d)", a, r, callers+2)
			}
			wantRejects := int64(3)
			if g.keyed != nil {
				wantRejects = 2
			}
			if rejects.Load() != wantRejects || badEvents.Load() != 0 {
				t.Errorf("Observer: %d rejects (want %d), %d events with wrong fields (want 0)", rejects.Load(), wantRejects, badEvents.Load())
			}
		})
	}
}

// waitFor waits, for at most 10 s, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not after 10s", what)
		}
	}
}
