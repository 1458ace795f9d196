package bulkheadpgx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// target is what *pgxpool.Pool, *bulkheadpgx.DB and *bulkheadpgx.ClassDB
// have in common; Acquire differs only in its result type (see acquirer).
type target interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	AcquireFunc(ctx context.Context, f func(*pgxpool.Conn) error) error
}

// acquiredConn is what *pgxpool.Conn and *bulkheadpgx.Conn have in common.
type acquiredConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Release()
}

// side is one end of the comparison: a target, its Acquire, and how to
// recognise the error that refused a call (the closed pool's error for
// pgxpool, the class's refusal for bulkheadpgx).
type side struct {
	name    string
	t       target
	acquire func(context.Context) (acquiredConn, error) // returns a nil interface for a nil conn
	refused func(error) bool
	class   *bulkheadpgx.ClassDB // nil for pgxpool
}

func poolSide(name string, p *pgxpool.Pool, refused func(error) bool) side {
	return side{name: name, t: p, refused: refused, acquire: func(ctx context.Context) (acquiredConn, error) {
		c, err := p.Acquire(ctx)
		if c == nil {
			return nil, err
		}
		return c, err
	}}
}

func classSide(name string, t target, c *bulkheadpgx.ClassDB, acquire func(context.Context) (*bulkheadpgx.Conn, error)) side {
	return side{name: name, t: t, class: c, acquire: func(ctx context.Context) (acquiredConn, error) {
		c, err := acquire(ctx)
		if c == nil {
			return nil, err
		}
		return c, err
	}, refused: func(err error) bool {
		return errors.Is(err, bulkheadpgx.ErrMaxWait)
	}}
}

// obs is what user code observes of one call, step by step: a step's
// result, or "panic" where using the result panics.
type obs []string

func (o *obs) add(step string, f func() string) {
	defer func() {
		if r := recover(); r != nil {
			*o = append(*o, step+": panic")
		}
	}()
	*o = append(*o, step+": "+f())
}

// classify names an error by the relations user code tests, not by its
// identity: a refusal by the class and the closed pool's error are both
// "refused".
func classify(err error, refused func(error) bool) string {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return "nil"
	case refused(err):
		return "refused"
	case errors.Is(err, pgx.ErrTxClosed):
		return "ErrTxClosed"
	case errors.Is(err, pgx.ErrNoRows):
		return "ErrNoRows"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.As(err, &pgErr):
		return "PgError " + pgErr.Code
	}
	return "error " + err.Error()
}

// call is one scenario's parameters for a probe.
type call struct {
	sql   string        // the statement the call runs
	table string        // CopyFrom's table
	opts  pgx.TxOptions // BeginTx's options
	// cancel, if set, is called by CopyFrom's source after its first row,
	// which then waits for the call's context to end.
	cancel context.CancelFunc
}

// slowSource yields one row, then cancels the call and waits for ctx to end.
type slowSource struct {
	ctx    context.Context
	cancel context.CancelFunc
	n      int
}

func (s *slowSource) Next() bool {
	s.n++
	if s.n == 1 {
		return true
	}
	s.cancel()
	<-s.ctx.Done()
	return false
}
func (s *slowSource) Values() ([]any, error) { return []any{1}, nil }
func (s *slowSource) Err() error             { return s.ctx.Err() }

// probes use each entry point's results the way user code does.
var probes = []struct {
	name string
	run  func(ctx context.Context, s side, c call) obs
}{
	{"Query", func(ctx context.Context, s side, c call) (o obs) {
		cls := func(err error) string { return classify(err, s.refused) }
		rows, err := s.t.Query(ctx, c.sql)
		o.add("err", func() string { return cls(err) })
		o.add("rows is nil", func() string { return fmt.Sprint(rows == nil) })
		o.add("Err", func() string { return cls(rows.Err()) })
		o.add("Next", func() string { return fmt.Sprint(rows.Next()) })
		o.add("Err after Next", func() string { return cls(rows.Err()) })
		o.add("Scan", func() string { var v int32; return cls(rows.Scan(&v)) })
		o.add("Values", func() string { v, err := rows.Values(); return fmt.Sprint(len(v), " ", cls(err)) })
		o.add("RawValues", func() string { return fmt.Sprint(len(rows.RawValues())) })
		o.add("FieldDescriptions", func() string { return fmt.Sprint(len(rows.FieldDescriptions())) })
		o.add("CommandTag", func() string { return rows.CommandTag().String() })
		o.add("Conn is nil", func() string { return fmt.Sprint(rows.Conn() == nil) })
		o.add("TypeMap is nil", func() string { return fmt.Sprint(rows.TypeMap() == nil) })
		o.add("Close", func() string { rows.Close(); return "ok" })
		o.add("Close again", func() string { rows.Close(); return "ok" })
		o.add("Err after Close", func() string { return cls(rows.Err()) })
		return o
	}},
	{"Query+CollectRows", func(ctx context.Context, s side, c call) (o obs) {
		// pgx's documented idiom: the error is read from the rows.
		rows, _ := s.t.Query(ctx, c.sql)
		o.add("CollectRows", func() string {
			v, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			return fmt.Sprint(len(v), " ", classify(err, s.refused))
		})
		return o
	}},
	{"QueryRow", func(ctx context.Context, s side, c call) (o obs) {
		cls := func(err error) string { return classify(err, s.refused) }
		row := s.t.QueryRow(ctx, c.sql)
		o.add("row is nil", func() string { return fmt.Sprint(row == nil) })
		o.add("Scan", func() string { var v int32; return cls(row.Scan(&v)) })
		o.add("Scan again", func() string { var v int32; return cls(row.Scan(&v)) })
		return o
	}},
	{"Exec", func(ctx context.Context, s side, c call) (o obs) {
		tag, err := s.t.Exec(ctx, c.sql)
		o.add("tag", func() string { return tag.String() })
		o.add("err", func() string { return classify(err, s.refused) })
		return o
	}},
	{"CopyFrom", func(ctx context.Context, s side, c call) (o obs) {
		var src pgx.CopyFromSource = pgx.CopyFromRows([][]any{{1}, {2}})
		if c.cancel != nil {
			src = &slowSource{ctx: ctx, cancel: c.cancel}
		}
		n, err := s.t.CopyFrom(ctx, pgx.Identifier{c.table}, []string{"v"}, src)
		o.add("n", func() string { return fmt.Sprint(n) })
		o.add("err", func() string { return classify(err, s.refused) })
		return o
	}},
	{"Begin", func(ctx context.Context, s side, c call) obs {
		tx, err := s.t.Begin(ctx)
		return probeTx(ctx, s, c, tx, err)
	}},
	{"BeginTx", func(ctx context.Context, s side, c call) obs {
		tx, err := s.t.BeginTx(ctx, c.opts)
		return probeTx(ctx, s, c, tx, err)
	}},
	{"BeginFunc", func(ctx context.Context, s side, c call) (o obs) {
		called := false
		err := pgx.BeginFunc(ctx, s.t, func(tx pgx.Tx) error {
			called = true
			_, err := tx.Exec(ctx, c.sql)
			return err
		})
		o.add("err", func() string { return classify(err, s.refused) })
		o.add("f called", func() string { return fmt.Sprint(called) })
		return o
	}},
	{"SendBatch", func(ctx context.Context, s side, c call) obs { return probeBatch(ctx, s, c, true) }},
	{"SendBatch without tx", func(ctx context.Context, s side, c call) obs { return probeBatch(ctx, s, c, false) }},
	{"AcquireFunc", func(ctx context.Context, s side, c call) (o obs) {
		called := false
		err := s.t.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
			called = true
			_, err := conn.Exec(ctx, c.sql)
			return err
		})
		o.add("err", func() string { return classify(err, s.refused) })
		o.add("f called", func() string { return fmt.Sprint(called) })
		return o
	}},
	{"Acquire", func(ctx context.Context, s side, c call) (o obs) {
		cls := func(err error) string { return classify(err, s.refused) }
		conn, err := s.acquire(ctx)
		o.add("err", func() string { return cls(err) })
		o.add("conn is nil", func() string { return fmt.Sprint(conn == nil) })
		o.add("Exec", func() string { _, err := conn.Exec(ctx, c.sql); return cls(err) })
		o.add("Release", func() string { conn.Release(); return "ok" })
		o.add("Release again", func() string { conn.Release(); return "ok" })
		return o
	}},
}

func probeTx(ctx context.Context, s side, c call, tx pgx.Tx, err error) (o obs) {
	cls := func(err error) string { return classify(err, s.refused) }
	o.add("err", func() string { return cls(err) })
	o.add("tx is nil", func() string { return fmt.Sprint(tx == nil) })
	o.add("Exec", func() string { _, err := tx.Exec(ctx, c.sql); return cls(err) })
	bg := context.Background()
	o.add("Commit", func() string { return cls(tx.Commit(bg)) })
	o.add("Rollback", func() string { return cls(tx.Rollback(bg)) })
	return o
}

func probeBatch(ctx context.Context, s side, c call, begin bool) (o obs) {
	cls := func(err error) string { return classify(err, s.refused) }
	b := &pgx.Batch{}
	if begin {
		b.BeginTx(pgx.TxOptions{})
	}
	b.Queue(c.sql)
	b.Queue("SELECT 1")
	br := s.t.SendBatch(ctx, b)
	o.add("results are nil", func() string { return fmt.Sprint(br == nil) })
	o.add("Tx is nil", func() string { return fmt.Sprint(br.Tx() == nil) })
	if begin {
		o.add("Exec (BEGIN)", func() string { _, err := br.Exec(); return cls(err) })
	}
	o.add("Query", func() string {
		rows, err := br.Query()
		isNil := rows == nil
		rows.Close() // pgx's own QueuedQuery.Query closes them without checking err
		return fmt.Sprint(cls(err), " rows is nil ", isNil)
	})
	o.add("QueryRow", func() string { var v int32; return cls(br.QueryRow().Scan(&v)) })
	o.add("Close", func() string { return cls(br.Close()) })
	o.add("Close again", func() string { return cls(br.Close()) })
	bg := context.Background()
	o.add("Tx().Rollback", func() string { return cls(br.Tx().Rollback(bg)) })
	o.add("Tx().Commit", func() string { return cls(br.Tx().Commit(bg)) })
	return o
}

// TestContractMatchesPgxpool is the differential test of pgx's contract:
// every entry point, refused in every way and failing in every way, gives
// user code what pgxpool's own error path gives it (nil or not, which
// methods can be called without a panic, what errors.Is finds), and gives
// its permit back.
func TestContractMatchesPgxpool(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, 8)
	sem := semaphore.New(1, semaphore.Config{}) // held by the test: the refusing classes find no room
	free := semaphore.New(2, semaphore.Config{})
	cfg := bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "maxwait", Gate: sem, MaxWait: 30 * time.Millisecond},
		{Name: "never", Gate: sem, MaxWait: -1},
		{Name: "ctx", Gate: sem},
		{Name: "free", Gate: free, MaxWait: 5 * time.Second},
	}}
	db := bulkheadpgx.New(pool, cfg)
	cfg.Default = "free"
	dbDefault := bulkheadpgx.New(pool, cfg) // the DB's own methods, in a limited class
	if !sem.TryAcquire(1) {
		t.Fatal("TryAcquire on a new semaphore failed")
	}
	defer sem.Release(1)

	// pgxpool's own error paths: a closed pool refuses every call; a full
	// pool (one connection, held) waits; an open pool runs the call.
	closed := pgtest.Pool(t, 2)
	closed.Close()
	_, closedErr := closed.Acquire(ctx)
	if closedErr == nil {
		t.Fatal("Acquire on a closed pool succeeded")
	}
	full := pgtest.Pool(t, 1)
	held, err := full.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	open := pgtest.Pool(t, 8)
	for _, p := range []*pgxpool.Pool{pool, open} {
		if _, err := p.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
			t.Fatal(err)
		}
	}
	isClosed := func(err error) bool { return errors.Is(err, closedErr) }
	never := func(error) bool { return false }
	class := func(name string) side {
		c := db.Class(name)
		return classSide("class "+name, c, c, c.Acquire)
	}
	dbSide := classSide("DB (default class limited)", dbDefault, dbDefault.Class("free"), dbDefault.Acquire)

	// Each scenario's prep gives one probe its context and call; the
	// returned cancel ends everything prep started.
	type prep func() (context.Context, context.CancelFunc, call)
	with := func(c call, cancelAfter time.Duration) prep {
		return func() (context.Context, context.CancelFunc, call) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			switch {
			case cancelAfter < 0:
				cancel()
			case cancelAfter > 0:
				t := time.AfterFunc(cancelAfter, cancel)
				return ctx, func() { t.Stop(); cancel() }, c
			}
			return ctx, cancel, c
		}
	}
	ok := call{sql: "SELECT 1", table: "t"}
	// midQuery cancels the call's context once its statement (marked, a
	// pg_sleep) shows up sleeping in pg_stat_activity, or, for CopyFrom, once
	// its source has given a row.
	admin := adminConn(t)
	mark := marker(t)
	var n int
	var watchErr atomic.Value
	midQuery := func() (context.Context, context.CancelFunc, call) {
		n++
		m := fmt.Sprintf("%s_%d*/", strings.TrimSuffix(mark, "*/"), n)
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var wg sync.WaitGroup
		wg.Go(func() {
			for ctx.Err() == nil {
				// Not under ctx: cancelling a query closes its connection.
				qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
				var k int
				// Sleeping: past the statement's parse and plan, so that both
				// sides are cancelled at the same point.
				err := admin.QueryRow(qctx, `SELECT count(*) FROM pg_stat_activity
					WHERE state = 'active' AND wait_event = 'PgSleep' AND position($1 in query) > 0`, m).Scan(&k)
				qcancel()
				if err != nil {
					watchErr.CompareAndSwap(nil, err)
					return
				}
				if k > 0 {
					cancel()
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
		return ctx, func() { cancel(); wg.Wait() }, call{sql: "SELECT " + m + " pg_sleep(5)", table: "t", cancel: cancel}
	}
	scenarios := []struct {
		name   string
		prep   prep
		oracle side
		ours   []side
	}{
		{"refused: MaxWait passed", with(ok, 0), poolSide("closed pool", closed, isClosed), []side{class("maxwait")}},
		{"refused: never wait", with(ok, 0), poolSide("closed pool", closed, isClosed), []side{class("never")}},
		{"refused: ctx cancelled while waiting", with(ok, 30*time.Millisecond), poolSide("full pool", full, never), []side{class("ctx")}},
		{"refused: ctx already done", with(ok, -1), poolSide("open pool", open, never), []side{class("free"), dbSide}},
		{"fails: SQL error",
			with(call{sql: "SELECT * FROM no_such_table", table: "no_such_table", opts: pgx.TxOptions{IsoLevel: "no such level"}}, 0),
			poolSide("open pool", open, never), []side{class("free"), dbSide}},
		{"fails: cancelled mid-query", midQuery, poolSide("open pool", open, never), []side{class("free"), dbSide}},
		{"succeeds", with(ok, 0), poolSide("open pool", open, never), []side{class("free"), dbSide}},
	}
	defer func() {
		if err := watchErr.Load(); err != nil {
			t.Errorf("watching pg_stat_activity: %v", err)
		}
	}()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, p := range probes {
				run := func(s side) obs {
					ctx, cancel, c := sc.prep()
					defer cancel()
					return p.run(ctx, s, c)
				}
				want := run(sc.oracle)
				for _, s := range sc.ours {
					start := time.Now()
					got := run(s)
					if d := time.Since(start); d > 4*time.Second {
						t.Errorf("%s through %s took %v: the call was not cut short", p.name, s.name, d)
					}
					if d := diff(got, want); d != "" {
						t.Errorf("%s through %s differs from pgxpool (%s):\n%s", p.name, s.name, sc.oracle.name, d)
					}
					waitIdle(t, s.class)
				}
			}
		})
	}
}

// diff lists the steps where got and want differ, or returns "".
func diff(got, want obs) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "\tbulkheadpgx %-40q pgxpool %q\n", g, w)
		}
	}
	return b.String()
}

// waitIdle waits until c holds nothing: a call whose connection the pool
// destroys gives its permit back once the connection is closed, shortly after
// the call returns.
func waitIdle(t *testing.T, c *bulkheadpgx.ClassDB) {
	t.Helper()
	if c == nil {
		return
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := c.Stats()
		if st.InUse == 0 && st.Waiting == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("class %s: InUse %d, Waiting %d 10s after the call ended, want 0, 0", c.Name(), st.InUse, st.Waiting)
		}
	}
}
