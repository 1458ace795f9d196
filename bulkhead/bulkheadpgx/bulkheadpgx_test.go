package bulkheadpgx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// runReports runs k report queries (pg_sleep(0.2), marked) through db's
// "reports" class from k goroutines and returns the first error.
func runReports(db *bulkheadpgx.DB, k int, mark string) error {
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for range k {
		wg.Go(func() {
			rows, err := db.Class("reports").Query(context.Background(), "SELECT "+mark+" pg_sleep(0.2)")
			if err != nil {
				errs <- err
				return
			}
			for rows.Next() {
			}
			if err := rows.Err(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func TestClassCapHolds(t *testing.T) {
	pool := pgtest.Pool(t, 30)
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: semaphore.New(3, semaphore.Config{})},
	}})
	mark := marker(t)
	s := sample(t, mark)

	// Cheap queries of the unlimited default class run all along.
	ctx, stopCheap := context.WithCancel(context.Background())
	var cheap atomic.Int64
	var cheapErr error
	var cheapWG sync.WaitGroup
	cheapWG.Go(func() {
		for ctx.Err() == nil {
			var one int
			if err := db.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				if ctx.Err() == nil {
					cheapErr = err
				}
				return
			}
			cheap.Add(1)
		}
	})

	start := time.Now()
	err := runReports(db, 20, mark)
	elapsed := time.Since(start)
	stopCheap()
	cheapWG.Wait()
	peak := s.done(t)
	if err != nil {
		t.Fatalf("report query: %v", err)
	}
	if cheapErr != nil {
		t.Fatalf("cheap query: %v", cheapErr)
	}
	if peak > 3 {
		t.Errorf("pg_stat_activity showed %d report queries at once, want at most 3", peak)
	}
	if peak < 2 {
		t.Errorf("pg_stat_activity showed at most %d report queries at once; the cap of 3 was never approached", peak)
	}
	// 20 queries of 0.2 s, 3 at a time: at least 7 rounds.
	if elapsed < 1300*time.Millisecond {
		t.Errorf("20 capped queries took %v, want at least 1.3s (7 rounds of 0.2s)", elapsed)
	}
	if cheap.Load() < 20 {
		t.Errorf("%d cheap queries ran meanwhile, want many (at least 20)", cheap.Load())
	}
	st := db.Stats()
	r := st.Classes[0]
	if r.Name != "reports" || r.Admitted != 20 || r.Hold.Count != 20 || r.Wait.Count == 0 {
		t.Errorf("reports stats = %+v, want 20 admitted and held, some waits", r)
	}
	// The last cheap call may have been cut short by stopCheap.
	if d := st.Classes[1]; d.Name != "default" || d.Calls < uint64(cheap.Load()) || d.Calls > uint64(cheap.Load())+1 {
		t.Errorf("default class stats = %+v, want Calls %d (or one more)", d, cheap.Load())
	}
	if st.Pool == nil || st.Pool.AcquireCount() == 0 {
		t.Errorf("Stats().Pool = %v, want pgxpool's stats with acquires", st.Pool)
	}
	checkIdle(t, db)
}

func TestFleetCapAcrossTwoPools(t *testing.T) {
	rdb := redistest.Connect(t)
	name := rdb.Key("reports")
	mark := marker(t)
	var dbs []*bulkheadpgx.DB
	for range 2 {
		// Its own Redis client and pool, as another process would have.
		client := redis.NewClient(redistest.Options(rdb.Client.Options().Addr))
		sem := distsem.New(client, name, 3, distsem.Config{})
		t.Cleanup(func() { sem.Close(); client.Close() })
		dbs = append(dbs, bulkheadpgx.New(pgtest.Pool(t, 20), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
			{Name: "reports", Gate: sem},
		}}))
	}
	s := sample(t, mark)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, db := range dbs {
		wg.Go(func() { errs[i] = runReports(db, 10, mark) })
	}
	wg.Wait()
	peak := s.done(t)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
	}
	if peak > 3 {
		t.Errorf("pg_stat_activity showed %d report queries at once across both pools, want at most 3", peak)
	}
	if peak < 2 {
		t.Errorf("pg_stat_activity showed at most %d report queries at once; the cap of 3 was never approached", peak)
	}
	for _, db := range dbs {
		checkIdle(t, db)
	}
}

func TestMaxWaitFailsFast(t *testing.T) {
	rdb := redistest.Connect(t)
	sem := distsem.New(rdb.Client, rdb.Key("mw"), 1, distsem.Config{})
	t.Cleanup(func() { sem.Close() })
	gates := []struct {
		name string
		gate floodgate.Gate
	}{
		{"local", semaphore.New(1, semaphore.Config{})},
		{"fleet", sem},
	}
	for _, g := range gates {
		t.Run(g.name, func(t *testing.T) {
			const maxWait = 100 * time.Millisecond
			db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
				{Name: "reports", Gate: g.gate, MaxWait: maxWait},
			}})
			reports := db.Class("reports")
			ctx := context.Background()
			tx, err := reports.Begin(ctx) // fills the class
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			start := time.Now()
			_, err = reports.Exec(ctx, "SELECT 1")
			elapsed := time.Since(start)
			if !errors.Is(err, bulkheadpgx.ErrMaxWait) {
				t.Fatalf("Exec with the class full = %v, want ErrMaxWait", err)
			}
			re, ok := errors.AsType[*bulkheadpgx.RejectError](err)
			if !ok || re.RetryAfter() <= 0 {
				t.Errorf("Exec error %v: RejectError %v, want one with RetryAfter > 0", err, re)
			}
			if elapsed < maxWait-5*time.Millisecond || elapsed > maxWait+400*time.Millisecond {
				t.Errorf("Exec failed after %v, want about %v", elapsed, maxWait)
			}
			st := reports.Stats()
			if st.InUse != 1 || st.Waiting != 0 || st.RejectedMaxWait != 1 {
				t.Errorf("stats with the tx open = %+v, want InUse 1, Waiting 0, RejectedMaxWait 1", st)
			}
			// The caller's deadline wins when sooner: ctx.Err(), not ErrMaxWait.
			dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err = reports.Exec(dctx, "SELECT 1")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, bulkheadpgx.ErrMaxWait) {
				t.Errorf("Exec with a 20ms deadline = %v, want the deadline or an early ErrMaxWait", err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			checkIdle(t, db)
			if _, err := reports.Exec(ctx, "SELECT 1"); err != nil {
				t.Errorf("Exec after the tx ended = %v, want nil", err)
			}
			checkIdle(t, db)
		})
	}
}

// TestMaxWaitMeaning checks the shared meaning of MaxWait (positive is
// TestMaxWaitFailsFast): negative never waits, zero waits as long as the
// caller's context allows.
func TestMaxWaitMeaning(t *testing.T) {
	rdb := redistest.Connect(t)
	fleet := distsem.New(rdb.Client, rdb.Key("mw"), 1, distsem.Config{})
	t.Cleanup(func() { fleet.Close() })
	gates := []struct {
		name string
		gate floodgate.Gate
	}{
		{"local", semaphore.New(1, semaphore.Config{})},
		{"fleet", fleet},
	}
	for _, g := range gates {
		t.Run(g.name, func(t *testing.T) {
			db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
				{Name: "never", Gate: g.gate, MaxWait: -1},
				{Name: "ctx", Gate: g.gate}, // MaxWait 0
			}})
			never, waits := db.Class("never"), db.Class("ctx")
			ctx := context.Background()
			// Both classes are free: a never-waiting call is admitted.
			if _, err := never.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatalf("never-waiting Exec with room = %v, want nil", err)
			}
			tx, err := waits.Begin(ctx) // fills the gate
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}

			// A bound, so that a call that waits fails the test instead of
			// hanging it.
			bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			start := time.Now()
			_, err = never.Exec(bctx, "SELECT 1")
			elapsed := time.Since(start)
			cancel()
			if !errors.Is(err, bulkheadpgx.ErrMaxWait) {
				t.Fatalf("never-waiting Exec with the gate full = %v, want ErrMaxWait", err)
			}
			if g.name == "fleet" && !errors.Is(err, distsem.ErrNoCapacity) {
				t.Errorf("never-waiting Exec on the fleet gate = %v, want distsem.ErrNoCapacity underneath", err)
			}
			if re, ok := errors.AsType[*bulkheadpgx.RejectError](err); !ok || re.RetryAfter() <= 0 {
				t.Errorf("never-waiting Exec error %v: RejectError %v, want one with RetryAfter > 0", err, re)
			}
			if elapsed > 500*time.Millisecond {
				t.Errorf("never-waiting Exec refused after %v, want at once", elapsed)
			}
			if st := never.Stats(); st.RejectedMaxWait != 1 || st.Waiting != 0 {
				t.Errorf("never-waiting class stats = %+v, want RejectedMaxWait 1, Waiting 0", st)
			}

			// Zero: the caller's deadline ends the wait (an early ErrMaxWait
			// is the local semaphore's ErrDeadline estimate).
			const deadline = 300 * time.Millisecond
			dctx, cancel := context.WithTimeout(ctx, deadline)
			start = time.Now()
			_, err = waits.Exec(dctx, "SELECT 1")
			elapsed = time.Since(start)
			cancel()
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				if elapsed < deadline-5*time.Millisecond {
					t.Errorf("Exec returned the deadline after %v, before it (%v)", elapsed, deadline)
				}
			case errors.Is(err, bulkheadpgx.ErrMaxWait):
			default:
				t.Errorf("Exec with MaxWait 0 and a %v deadline = %v, want the deadline", deadline, err)
			}

			// Zero: with no deadline, the call waits until there is room.
			errc := make(chan error, 1)
			go func() {
				_, err := waits.Exec(ctx, "SELECT 1")
				errc <- err
			}()
			for end := time.Now().Add(10 * time.Second); waits.Stats().Waiting != 1; {
				if time.Now().After(end) {
					t.Fatal("the waiting Exec never showed up in Stats().Waiting")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Exec waiting with MaxWait 0 = %v, want nil once the tx ended", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Exec waiting with MaxWait 0 was not admitted after the tx ended")
			}
			checkIdle(t, db)
		})
	}
}

// TestReleasePaths ends the database work in every way and checks that the
// class's one permit is back after each.
func TestReleasePaths(t *testing.T) {
	sem := semaphore.New(1, semaphore.Config{})
	db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "c", Gate: sem, MaxWait: time.Second},
	}})
	c := db.Class("c")
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	// held checks, during the work, that the class's permit is taken.
	held := func(t *testing.T) {
		t.Helper()
		if got := c.Stats().InUse; got != 1 {
			t.Errorf("InUse during the work = %d, want 1", got)
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T) error // returns the error the path is expected to surface, if any
		fail bool
		// destroyed: the path leaves the connection to be destroyed, and the
		// permit comes back once it is closed (PostgreSQL has ended the
		// query), shortly after the call returns.
		destroyed bool
	}{
		{"rows closed", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT generate_series(1, 3)")
			if err != nil {
				return err
			}
			held(t)
			rows.Next()
			rows.Close()
			return nil
		}, false, false},
		{"rows read to end", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT generate_series(1, 3)")
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			if n != 3 {
				t.Errorf("read %d rows, want 3", n)
			}
			return rows.Err()
		}, false, false},
		{"rows collected", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT generate_series(1, 3)")
			if err != nil {
				return err
			}
			_, err = pgx.CollectRows(rows, pgx.RowTo[int32])
			return err
		}, false, false},
		{"query fails", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT * FROM no_such_table")
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}, true, false},
		{"row scanned", func(t *testing.T) error {
			var v int
			return c.QueryRow(ctx, "SELECT 1").Scan(&v)
		}, false, false},
		{"row no rows", func(t *testing.T) error {
			var v int
			err := c.QueryRow(ctx, "SELECT 1 WHERE false").Scan(&v)
			if !errors.Is(err, pgx.ErrNoRows) {
				t.Errorf("Scan = %v, want pgx.ErrNoRows", err)
			}
			return err
		}, true, false},
		{"exec", func(t *testing.T) error {
			_, err := c.Exec(ctx, "INSERT INTO t VALUES (1)")
			return err
		}, false, false},
		{"exec fails", func(t *testing.T) error {
			_, err := c.Exec(ctx, "INSERT INTO no_such_table VALUES (1)")
			return err
		}, true, false},
		{"copy from", func(t *testing.T) error {
			_, err := c.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"v"}, pgx.CopyFromRows([][]any{{1}, {2}}))
			return err
		}, false, false},
		{"tx committed", func(t *testing.T) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx) // after Commit: ErrTxClosed, nothing released twice
			held(t)
			if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, false, false},
		{"tx rolled back", func(t *testing.T) error {
			tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
			if err != nil {
				return err
			}
			held(t)
			return tx.Rollback(ctx)
		}, false, false},
		{"tx failed commit", func(t *testing.T) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			tx.Exec(ctx, "SELECT * FROM no_such_table")
			return tx.Commit(ctx)
		}, true, false},
		{"begin func", func(t *testing.T) error {
			return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				held(t)
				_, err := tx.Exec(ctx, "INSERT INTO t VALUES (3)")
				return err
			})
		}, false, false},
		{"batch closed", func(t *testing.T) error {
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			b.Queue("INSERT INTO t VALUES (4)")
			br := c.SendBatch(ctx, b)
			held(t)
			if _, err := br.Exec(); err != nil {
				return err
			}
			return br.Close()
		}, false, false},
		{"batch fails", func(t *testing.T) error {
			b := &pgx.Batch{}
			b.Queue("SELECT * FROM no_such_table")
			return c.SendBatch(ctx, b).Close()
		}, true, false},
		{"conn released", func(t *testing.T) error {
			conn, err := c.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			held(t)
			var v int
			return conn.QueryRow(ctx, "SELECT 1").Scan(&v)
		}, false, false},
		{"acquire func", func(t *testing.T) error {
			return c.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
				held(t)
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			})
		}, false, false},
		{"acquire func error", func(t *testing.T) error {
			return c.AcquireFunc(ctx, func(*pgxpool.Conn) error { return errors.New("boom") })
		}, true, false},
		{"acquire func panic", func(t *testing.T) error {
			return boom(t, func() { c.AcquireFunc(ctx, func(*pgxpool.Conn) error { panic("boom") }) })
		}, true, false},
		{"ctx cancelled mid-query", func(t *testing.T) error {
			qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			rows, err := c.Query(qctx, "SELECT pg_sleep(5)")
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Err()
		}, true, true},
		{"ctx cancelled mid-exec", func(t *testing.T) error {
			qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := c.Exec(qctx, "SELECT pg_sleep(5)")
			return err
		}, true, true},
		{"ctx cancelled mid-tx", func(t *testing.T) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err = tx.Exec(qctx, "SELECT pg_sleep(5)")
			return err
		}, true, true},
		{"rows closed twice", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT generate_series(1, 3)")
			if err != nil {
				return err
			}
			rows.Close()
			rows.Close()
			for rows.Next() {
			}
			return rows.Err()
		}, false, false},
		{"rows scan fails", func(t *testing.T) error {
			rows, err := c.Query(ctx, "SELECT 'x'")
			if err != nil {
				return err
			}
			rows.Next()
			var v int
			err = rows.Scan(&v) // closes the rows, as pgxpool's do
			if st := c.Stats(); st.InUse != 0 {
				t.Errorf("InUse after a failed Scan = %d, want 0", st.InUse)
			}
			return err
		}, true, false},
		{"row scan panics", func(t *testing.T) error {
			return boom(t, func() { c.QueryRow(ctx, "SELECT 1").Scan(panicScanner{}) })
		}, true, true},
		{"begin func panic", func(t *testing.T) error {
			return boom(t, func() { pgx.BeginFunc(ctx, c, func(pgx.Tx) error { panic("boom") }) })
		}, true, false},
		{"batch tx committed", func(t *testing.T) error {
			b := &pgx.Batch{}
			b.BeginTx(pgx.TxOptions{})
			b.Queue("INSERT INTO t VALUES (5)")
			br := c.SendBatch(ctx, b)
			defer br.Tx().Rollback(ctx)
			if err := br.Close(); err != nil {
				return err
			}
			held(t) // the transaction is still open
			return br.Tx().Commit(ctx)
		}, false, false},
		{"conn hijacked", func(t *testing.T) error {
			conn, err := c.Acquire(ctx)
			if err != nil {
				return err
			}
			held(t)
			pc := conn.Hijack()
			defer pc.Close(ctx)
			conn.Release() // no-op after Hijack
			return nil
		}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Stats().Hold.Count
			err := tt.run(t)
			if (err != nil) != tt.fail {
				t.Errorf("error = %v, want failure %v", err, tt.fail)
			}
			if tt.destroyed {
				waitIdle(t, c)
			}
			checkIdle(t, db)
			if !sem.TryAcquire(1) {
				t.Fatal("the class's semaphore is still held after the work ended")
			}
			sem.Release(1)
			if got := c.Stats().Hold.Count; got != before+1 {
				t.Errorf("Hold.Count went from %d to %d, want one more", before, got)
			}
		})
	}
}

func TestBackendKilledMidQuery(t *testing.T) {
	sem := semaphore.New(1, semaphore.Config{})
	db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: sem, MaxWait: time.Second},
	}})
	mark := marker(t)
	admin := adminConn(t)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		rows, err := db.Class("reports").Query(ctx, "SELECT "+mark+" pg_sleep(30)")
		if err != nil {
			errc <- err
			return
		}
		for rows.Next() {
		}
		errc <- rows.Err()
	}()
	var killed bool
	for deadline := time.Now().Add(10 * time.Second); !killed && time.Now().Before(deadline); {
		if err := admin.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity
			WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, mark).Scan(&killed); err != nil {
			t.Fatalf("terminate: %v", err)
		}
	}
	if !killed {
		t.Fatal("the report query never showed up in pg_stat_activity")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("query on a terminated backend succeeded, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("query on a terminated backend did not return")
	}
	checkIdle(t, db)
	if _, err := db.Class("reports").Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("Exec after the kill = %v, want nil", err)
	}
}

func TestLostLeaseCancelsQuery(t *testing.T) {
	rdb := redistest.Connect(t)
	sem := distsem.New(rdb.Client, rdb.Key("lost"), 1, distsem.Config{Lease: time.Second})
	t.Cleanup(func() { sem.Close() })
	db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: sem, MaxWait: time.Second},
	}})
	errc := make(chan error, 1)
	go func() {
		_, err := db.Class("reports").Exec(context.Background(), "SELECT pg_sleep(30)")
		errc <- err
	}()
	// Wait until the permit is held, then make Redis forget it.
	for deadline := time.Now().Add(5 * time.Second); db.Class("reports").Stats().InUse == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the query never got its permit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := rdb.Client.Del(context.Background(), sem.Keys()...).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("query whose lease was lost succeeded, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("query whose lease was lost was not cancelled")
	}
	waitIdle(t, db.Class("reports")) // the cancelled query's connection is destroyed
}

func TestBadInput(t *testing.T) {
	pool := pgtest.Pool(t, 2)
	sem := semaphore.New(4, semaphore.Config{})
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "heavy", N: 3, Gate: sem, MaxWait: -1},              // never waits
		{Name: "heavywait", N: 3, Gate: sem, MaxWait: time.Second}, // waits at most 1s
		{Name: "heavyctx", N: 3, Gate: sem},                        // waits as long as ctx allows
	}})
	sem.SetLimit(2) // now the classes' weight is above the limit
	ctx := context.Background()
	t.Run("unknown class", func(t *testing.T) {
		// A programmer error, caught where the class is looked up (at
		// wiring), before any call.
		defer wantPanic(t, `bulkheadpgx: unknown class "reprots"`)
		db.Class("reprots")
	})
	t.Run("weight above the cap", func(t *testing.T) {
		for _, name := range []string{"heavy", "heavywait", "heavyctx"} {
			start := time.Now()
			_, err := db.Class(name).Exec(ctx, "SELECT 1")
			if !errors.Is(err, bulkheadpgx.ErrTooLarge) {
				t.Errorf("%s: Exec = %v, want ErrTooLarge", name, err)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("%s: Exec refused after %v, want at once", name, d)
			}
			if st := db.Class(name).Stats(); st.RejectedTooLarge != 1 {
				t.Errorf("%s: RejectedTooLarge = %d, want 1", name, st.RejectedTooLarge)
			}
		}
		if st := sem.Stats(); st.InUse != 0 {
			t.Errorf("semaphore InUse = %d, want 0", st.InUse)
		}
	})
	t.Run("nil pool", func(t *testing.T) {
		defer wantPanic(t, "bulkheadpgx: nil pool")
		bulkheadpgx.New(nil, bulkheadpgx.Config{})
	})
	t.Run("config", func(t *testing.T) {
		keyed := semaphore.NewKeyed(1, semaphore.KeyedConfig{})
		key := func(context.Context) string { return "k" }
		for _, tt := range []struct {
			cfg  bulkheadpgx.Config
			want string
		}{
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{}}}, "bulkheadpgx: class without a Name"},
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "a"}, {Name: "a"}}}, "bulkheadpgx: class a: duplicate Name"},
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "a", N: -1}}}, "bulkheadpgx: class a: negative N"},
			{bulkheadpgx.Config{Default: "b"}, "bulkheadpgx: Default names unknown class b"},
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "a", Gate: sem, KeyedGate: keyed, Key: key}}}, "bulkheadpgx: class a: both Gate and KeyedGate"},
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "a", KeyedGate: keyed}}}, "bulkheadpgx: class a: KeyedGate and Key go together"},
			{bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "a", Gate: sem, Key: key}}}, "bulkheadpgx: class a: KeyedGate and Key go together"},
		} {
			func() {
				defer wantPanic(t, tt.want)
				bulkheadpgx.New(pool, tt.cfg)
			}()
		}
	})
	t.Run("done context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{Name: "c", Gate: sem}}})
		if _, err := db.Class("c").Exec(cctx, "SELECT 1"); err != context.Canceled {
			t.Errorf("Exec with a done context = %v, want context.Canceled", err)
		}
		checkIdle(t, db)
	})
	checkIdle(t, db)
}

// boom runs f, which must panic with "boom", and returns an error saying it
// did.
func boom(t *testing.T, f func()) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want the panic boom", r)
		}
		err = errors.New("panicked")
	}()
	f()
	return nil
}

// panicScanner panics when scanned into.
type panicScanner struct{}

func (panicScanner) Scan(any) error { panic("boom") }

func wantPanic(t *testing.T, want string) {
	t.Helper()
	if r := recover(); r != want {
		t.Errorf("panic = %v, want %q", r, want)
	}
}
