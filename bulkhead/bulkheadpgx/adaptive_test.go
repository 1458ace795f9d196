package bulkheadpgx_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestAdaptiveClassCountsDeadlinesAsDrops checks, end to end, what an
// adaptive gate learns from a class's calls that fail: a query whose context's
// deadline passes is a drop (the class gives the weight back once PostgreSQL
// has stopped the query, after the deadline), a query whose context is
// cancelled is neither a drop nor a sample, and a query ended by the server's
// statement_timeout is a sample (its hold time), not a drop: the class cannot
// tell it from a slow query.
func TestAdaptiveClassCountsDeadlinesAsDrops(t *testing.T) {
	// one runs f on a class of a fresh DB whose gate is adaptive, closes the
	// DB (which waits for cancelled calls to give their weight back) and
	// returns the gate's counts.
	one := func(t *testing.T, f func(t *testing.T, c *bulkheadpgx.ClassDB, g *adaptive.Gate)) adaptive.Stats {
		g := adaptive.New(adaptive.Config{Max: 4})
		db := bulkheadpgx.New(pgtest.Pool(t, 2), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
			{Name: "a", Gate: g, MaxWait: 5 * time.Second},
		}})
		f(t, db.Class("a"), g)
		db.Close()
		return g.Stats()
	}
	cases := []struct {
		name           string
		run            func(t *testing.T, c *bulkheadpgx.ClassDB, g *adaptive.Gate)
		samples, drops uint64
	}{
		{"ok", func(t *testing.T, c *bulkheadpgx.ClassDB, _ *adaptive.Gate) {
			var one int
			if err := c.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("SELECT 1: %v", err)
			}
		}, 1, 0},
		{"deadline", func(t *testing.T, c *bulkheadpgx.ClassDB, _ *adaptive.Gate) {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			var s string
			err := c.QueryRow(ctx, "SELECT pg_sleep(5)::text").Scan(&s)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("pg_sleep(5) under a 200ms deadline: %v, want one matching context.DeadlineExceeded", err)
			}
		}, 0, 1},
		{"deadline after a wait", func(t *testing.T, c *bulkheadpgx.ClassDB, g *adaptive.Gate) {
			// The gate's limit is 1 (its Initial): a first query holds it
			// for 300 ms, the second waits for it (under MaxWait, which
			// wraps the Held) and its deadline passes 300 ms into its query.
			errc := make(chan error, 1)
			go func() { _, err := c.Exec(t.Context(), "SELECT pg_sleep(0.3)"); errc <- err }()
			for g.Stats().InFlight == 0 {
				runtime.Gosched() // until the first query holds the gate
			}
			ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
			defer cancel()
			var s string
			err := c.QueryRow(ctx, "SELECT pg_sleep(5)::text").Scan(&s)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("pg_sleep(5) under a 600ms deadline: %v, want one matching context.DeadlineExceeded", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("pg_sleep(0.3): %v", err)
			}
			if w := c.Stats().Wait.Count; w != 1 {
				t.Fatalf("class waits %d, want 1", w)
			}
		}, 1, 1},
		{"canceled", func(t *testing.T, c *bulkheadpgx.ClassDB, _ *adaptive.Gate) {
			mark := marker(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				var s string
				errc <- c.QueryRow(ctx, "SELECT "+mark+" pg_sleep(5)::text").Scan(&s)
			}()
			// Cancel only once PostgreSQL runs the query, so that the gate
			// was held.
			admin := adminConn(t)
			for deadline := time.Now().Add(10 * time.Second); ; {
				var n int
				if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
					WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, mark).Scan(&n); err != nil {
					t.Fatalf("pg_stat_activity: %v", err)
				}
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the query did not show in pg_stat_activity within 10 s")
				}
				time.Sleep(5 * time.Millisecond) // polling the server: there is no event to wait for
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("pg_sleep(5), cancelled: %v, want one matching context.Canceled", err)
			}
		}, 0, 0},
		{"statement_timeout", func(t *testing.T, c *bulkheadpgx.ClassDB, _ *adaptive.Gate) {
			ctx := t.Context()
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '100ms'"); err != nil {
				t.Fatalf("SET LOCAL statement_timeout: %v", err)
			}
			_, err = tx.Exec(ctx, "SELECT pg_sleep(5)")
			if pe, ok := errors.AsType[*pgconn.PgError](err); !ok || pe.Code != "57014" {
				t.Fatalf("pg_sleep(5) under a 100ms statement_timeout: %v, want SQLSTATE 57014", err)
			}
		}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := one(t, c.run)
			if st.Samples != c.samples || st.Drops != c.drops || st.InFlight != 0 {
				t.Errorf("adaptive gate after the call: Samples %d, Drops %d, InFlight %d; want %d, %d, 0",
					st.Samples, st.Drops, st.InFlight, c.samples, c.drops)
			}
		})
	}
}
