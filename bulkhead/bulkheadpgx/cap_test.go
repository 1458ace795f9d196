package bulkheadpgx_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTimedOutCallHoldsPermitUntilCancelled checks that the cap holds at the
// database: a call whose context ends mid-query gives its permit back only
// once PostgreSQL has stopped running it (pgconn cancels the query and closes
// the connection in the background), as pgxpool's own MaxConns does. After
// each timed-out call, the next call of the class (cap 1) counts the class's
// queries still running: it must see none.
func TestTimedOutCallHoldsPermitUntilCancelled(t *testing.T) {
	const rounds = 8
	ctx := context.Background()
	mark := marker(t)
	slow := "SELECT " + mark + " pg_sleep(5)"
	const running = `SELECT count(*) FROM pg_stat_activity
		WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`
	// Each entry point's way of running slow under ctx until ctx ends.
	calls := []struct {
		name string
		run  func(ctx context.Context, t target, acquire func(context.Context) (acquiredConn, error))
	}{
		{"Exec", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) { t.Exec(ctx, slow) }},
		{"Query", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) {
			if rows, err := t.Query(ctx, slow); err == nil {
				pgx.CollectRows(rows, pgx.RowTo[string])
			}
		}},
		{"QueryRow", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) {
			var s string
			t.QueryRow(ctx, slow).Scan(&s)
		}},
		{"SendBatch", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) {
			b := &pgx.Batch{}
			b.Queue(slow)
			t.SendBatch(ctx, b).Close()
		}},
		{"Begin", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) {
			tx, err := t.Begin(ctx)
			if err != nil {
				return
			}
			tx.Exec(ctx, slow)
			tx.Rollback(context.Background())
		}},
		{"AcquireFunc", func(ctx context.Context, t target, _ func(context.Context) (acquiredConn, error)) {
			t.AcquireFunc(ctx, func(c *pgxpool.Conn) error { _, err := c.Exec(ctx, slow); return err })
		}},
		{"Acquire", func(ctx context.Context, _ target, acquire func(context.Context) (acquiredConn, error)) {
			c, err := acquire(ctx)
			if err != nil {
				return
			}
			c.Exec(ctx, slow)
			c.Release()
		}},
	}
	// seen runs the calls through s, each followed by a count of the
	// class's queries still running, and returns in how many rounds that
	// count was not zero.
	seen := func(t *testing.T, s side, run func(context.Context, target, func(context.Context) (acquiredConn, error))) (n int) {
		for range rounds {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			run(cctx, s.t, s.acquire)
			cancel()
			bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			var k int
			// One round trip (no prepare), to look as soon as the class admits it.
			err := s.t.QueryRow(bctx, running, pgx.QueryExecModeSimpleProtocol, mark).Scan(&k)
			cancel()
			if err != nil {
				t.Fatalf("counting running queries: %v", err)
			}
			if k != 0 {
				n++
			}
		}
		return n
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			// pgxpool's own cap of 1, as the reference.
			p := pgtest.Pool(t, 1)
			want := seen(t, poolSide("pool", p, nil), c.run)
			db := bulkheadpgx.New(pgtest.Pool(t, 4), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
				{Name: "c", Gate: semaphore.New(1, semaphore.Config{})},
			}})
			cd := db.Class("c")
			s := sample(t, mark)
			got := seen(t, classSide("class", cd, cd, cd.Acquire), c.run)
			peak := s.done(t)
			if got != 0 || peak > 1 {
				t.Errorf("cap 1: after %d of %d timed-out calls the next call of the class started while PostgreSQL still ran the timed-out one; "+
					"pg_stat_activity showed up to %d at once (pgxpool with MaxConns 1: %d of %d)", got, rounds, peak, want, rounds)
			}
			waitIdle(t, cd)
		})
	}
}

// TestCloseWaitsForCancelledCalls checks that DB.Close returns only once the
// permits of calls cancelled mid-query are back.
func TestCloseWaitsForCancelledCalls(t *testing.T) {
	db := bulkheadpgx.New(pgtest.Pool(t, 4), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "c", Gate: semaphore.New(2, semaphore.Config{})},
	}})
	c := db.Class("c")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Exec(ctx, "SELECT pg_sleep(5)"); err == nil {
		t.Fatal("Exec of pg_sleep(5) with a 100ms timeout succeeded")
	}
	db.Close()
	if st := c.Stats(); st.InUse != 0 {
		t.Errorf("InUse after Close = %d, want 0", st.InUse)
	}
}
