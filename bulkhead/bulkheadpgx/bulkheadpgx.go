package bulkheadpgx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Gate caps the weight of database work in flight for a class and lets the
// weight be held past a function's return, until the rows, transaction, batch
// or connection is done with.
//
// Hold waits for n of the limit on ctx and returns the context the work runs
// under (ctx itself, or a context derived from ctx that is cancelled when the
// gate loses the weight, as a fleet-wide lease can) and release, which gives
// n back. bulkheadpgx calls release exactly once, when the work ends. On error
// nothing is held: a rejection error should carry RetryAfter.
//
// *semaphore.Weighted (one process) and *distsem.Semaphore (the fleet) are
// Gates. Optional methods a Gate may also have:
//   - TryAcquire(n int64) bool, Acquire(ctx, n) error and Release(n int64), as
//     semaphore.Weighted has: the gate is used through those, with no closure,
//     no allocation and no clock read when there is room;
//   - TryHold(ctx, n), Hold's shape, taking n only if it is free now, as
//     distsem.Semaphore has: it serves a negative MaxWait (never wait);
//   - Limit() int64, as both have: the class's weight is checked against it
//     in New (a panic) and on each call that finds no room (ErrTooLarge).
type Gate interface {
	Hold(ctx context.Context, n int64) (wctx context.Context, release func(), err error)
}

// localGate is the fast shape of a Gate (semaphore.Weighted).
type localGate interface {
	TryAcquire(n int64) bool
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// tryHolder is an optional method of a Gate: Hold without waiting.
type tryHolder interface {
	TryHold(ctx context.Context, n int64) (wctx context.Context, release func(), err error)
}

// limited is an optional method of a Gate: its current limit.
type limited interface{ Limit() int64 }

// A Class is a kind of query with its own cap: "reports", weight 1, at most
// 50 at once across the fleet, waiting at most 2 s.
type Class struct {
	// Name names the class in DB.Class, errors and Stats. Required, unique.
	Name string

	// N is the weight one call of this class holds on Gate. If zero, 1.
	// Negative panics in New.
	N int64

	// Gate caps the class: a semaphore.Weighted for one process, a
	// distsem.Semaphore for the fleet. If nil, the class is unlimited: calls
	// go straight to the pool and only their number is counted.
	Gate Gate

	// MaxWait bounds how long a call waits for Gate, as everywhere in
	// floodgate. If positive, a call waits at most MaxWait (and never past
	// the caller's own deadline), then fails with a *RejectError matching
	// ErrMaxWait. If zero (the default), a call waits as long as its context
	// allows (and the Gate's own configuration: a semaphore.Weighted's
	// MaxWait or MaxWaiters still apply). If negative, a call never waits: one
	// that finds no room fails at once with ErrMaxWait; the Gate must then be
	// able to refuse at once (TryAcquire or TryHold, see Gate), or New panics.
	MaxWait time.Duration

	// RetryAfter is the delay given with ErrMaxWait when the gate gave no
	// estimate. If zero, MaxWait when it is positive, else 1s.
	RetryAfter time.Duration
}

// Config configures a DB. The zero Config is valid: one unlimited class named
// "default" that the DB's own methods use.
type Config struct {
	// Classes are the query classes a call can pick with DB.Class.
	Classes []Class

	// Default names the class that the DB's own methods (DB.Query, DB.Exec,
	// ...) use. If empty, "default", which is added as an unlimited class if
	// Classes does not define it.
	Default string

	// OnWait, if non-nil, is called with the class's name and the time
	// waited for each call of a limited class that found no room at once and
	// was then granted the gate (the waits ClassStats.Wait counts, less those
	// that ended in a refusal). OnHold, if non-nil, is called with the class's
	// name and the time from grant to release of each admitted call of a
	// limited class (ClassStats.Hold). Both are called without locks held, on
	// the goroutine that waited or released; they must be quick and safe for
	// concurrent use.
	OnWait, OnHold func(class string, d time.Duration)
}

// DB wraps a *pgxpool.Pool with query classes. Its methods have the pool's
// signatures and run in the default class; DB.Class picks another class. Use
// New; a zero DB is not usable. A DB is safe for simultaneous use by multiple
// goroutines.
type DB struct {
	pool    *pgxpool.Pool
	classes map[string]*ClassDB
	order   []*ClassDB
	def     *ClassDB
	bg      sync.WaitGroup // permits given back after a destroyed connection's cleanup
}

// ClassDB runs calls in one class of a DB: it has the pool's methods, and
// holds the class's gate for exactly as long as each call's database work.
// Get one with DB.Class (it can be kept and reused). A ClassDB is safe for
// simultaneous use by multiple goroutines.
type ClassDB struct {
	pool    *pgxpool.Pool
	name    string
	n       int64
	gate    Gate
	local   localGate
	try     tryHolder
	limit   limited
	maxWait time.Duration
	retry   time.Duration
	err     error // ErrUnknownClass, wrapped; set only on unknown classes
	st      counters
	bg      *sync.WaitGroup // the DB's

	onWait, onHold func(string, time.Duration) // Config's hooks
}

// New returns a DB that runs queries on pool in cfg's classes. It does no
// I/O. It panics on a programmer error: a nil pool, a class without a Name or
// with a duplicate one, a negative N, an N above the limit of a Gate that
// reports one (Limit() int64), or a negative MaxWait with a Gate that cannot
// refuse at once (neither TryAcquire nor TryHold).
func New(pool *pgxpool.Pool, cfg Config) *DB {
	if pool == nil {
		panic("bulkheadpgx: nil pool")
	}
	db := &DB{pool: pool, classes: make(map[string]*ClassDB, len(cfg.Classes)+1)}
	for _, c := range cfg.Classes {
		what := "bulkheadpgx: class " + c.Name + ": "
		switch {
		case c.Name == "":
			panic("bulkheadpgx: class without a Name")
		case db.classes[c.Name] != nil:
			panic(what + "duplicate Name")
		case c.N < 0:
			panic(what + "negative N")
		}
		cd := &ClassDB{pool: pool, name: c.Name, n: max(c.N, 1), gate: c.Gate, maxWait: c.MaxWait, retry: c.RetryAfter,
			onWait: cfg.OnWait, onHold: cfg.OnHold, bg: &db.bg}
		if cd.retry <= 0 {
			cd.retry = time.Second
			if c.MaxWait > 0 {
				cd.retry = c.MaxWait
			}
		}
		if c.Gate != nil {
			cd.local, _ = c.Gate.(localGate)
			cd.try, _ = c.Gate.(tryHolder)
			cd.limit, _ = c.Gate.(limited)
			if cd.limit != nil && cd.n > cd.limit.Limit() {
				panic(fmt.Sprintf("%sN %d exceeds the gate's limit %d", what, cd.n, cd.limit.Limit()))
			}
			if c.MaxWait < 0 && cd.local == nil && cd.try == nil {
				panic(what + "negative MaxWait with a Gate that cannot refuse at once (no TryAcquire or TryHold)")
			}
		}
		db.classes[c.Name] = cd
		db.order = append(db.order, cd)
	}
	name := cfg.Default
	if name == "" {
		name = "default"
		if db.classes[name] == nil {
			cd := &ClassDB{pool: pool, name: name, n: 1, bg: &db.bg}
			db.classes[name] = cd
			db.order = append(db.order, cd)
		}
	}
	if db.def = db.classes[name]; db.def == nil {
		panic("bulkheadpgx: Default names unknown class " + name)
	}
	return db
}

// Pool returns the wrapped pool. Calls made on it directly are not counted
// by any class.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Close closes the pool, as pgxpool.Pool.Close does (it waits for the
// connections to be returned and closed), and then waits for the permits of
// destroyed connections to be given back once their cleanup is done.
func (db *DB) Close() {
	db.pool.Close()
	db.bg.Wait()
}

// Class returns the calls of class name. If db has no such class, every call
// of the result fails with an error matching ErrUnknownClass, naming it, and
// touches neither the pool nor any gate.
//
// The class is chosen explicitly per call (db.Class("reports").Query(...))
// rather than carried in a context value: the choice is visible where the
// query is written, a context cannot silently carry a class into code that
// never meant to be limited (or drop it across a goroutine), and a handle can
// be looked up once and kept.
func (db *DB) Class(name string) *ClassDB {
	if c := db.classes[name]; c != nil {
		return c
	}
	return &ClassDB{pool: db.pool, name: name, err: fmt.Errorf("%w %q", ErrUnknownClass, name), bg: &db.bg}
}

// Name returns the class's name.
func (c *ClassDB) Name() string { return c.name }

// A hold is what one call holds: the class's weight, from its grant, and
// the pool connection the call runs on, until release.
type hold struct {
	c      *ClassDB           // nil for an unlimited class: no weight
	conn   *pgxpool.Conn      // nil until the call has a connection
	pgc    *pgx.Conn          // conn.Conn(), kept: readable after a Hijack
	rel    func()             // a Gate's release; nil for the fast shape
	cancel context.CancelFunc // ends the work context made for a MaxWait; may be nil
	start  time.Time
	done   atomic.Bool
}

// cleanupWait bounds the wait for a destroyed connection's cleanup, as
// pgxpool bounds its own (its destructor waits 15 s at most).
const cleanupWait = 15 * time.Second

// release returns the connection to the pool and gives the weight back, once.
//
// The weight is given back when the connection is back: at once for a
// connection the pool keeps, and for one the pool destroys (closed by an
// error or a cancelled context, busy, or left in a transaction) only once
// its cleanup is done. A query whose context ends is still running in
// PostgreSQL when pgx returns: pgconn closes the connection and, in the
// background, sends a cancel request and waits for the server to end the
// session (PgConn.CleanupDone). pgxpool frees the slot of a destroyed
// connection only then, and so does a class: the cap holds at the database,
// not only in the process. That wait runs on a goroutine of the DB (DB.Close
// waits for it), so the caller's call returns as soon as pgx's does.
func (h *hold) release() {
	if h.done.Swap(true) {
		return
	}
	var cleanup <-chan struct{}
	if h.conn != nil {
		if pg := h.pgc.PgConn(); h.pgc.IsClosed() || pg.IsBusy() || pg.TxStatus() != 'I' {
			cleanup = pg.CleanupDone() // the pool's Release destroys it
			select {
			case <-cleanup:
				cleanup = nil // already done
			default:
			}
		}
		if cleanup != nil && h.c != nil {
			// Before the pool has the connection back, so that DB.Close (the
			// pool's Close waits for it) cannot return before this is counted.
			h.c.bg.Add(1)
		}
		h.conn.Release()
	}
	if h.c == nil {
		return
	}
	if cleanup == nil {
		h.giveBack()
		return
	}
	go func() {
		defer h.c.bg.Done()
		t := time.NewTimer(cleanupWait)
		defer t.Stop()
		select {
		case <-cleanup:
		case <-t.C:
		}
		h.giveBack()
	}()
}

// giveBack gives the class's weight back to its gate.
func (h *hold) giveBack() {
	c := h.c
	// InUse first, then the gate: InUse counts a call only while its weight is
	// really held, so it never reads above what the gate allows.
	c.st.inUse.Add(-c.n)
	if h.rel != nil {
		h.rel()
	} else {
		c.local.Release(c.n)
	}
	if h.cancel != nil {
		h.cancel()
	}
	held := time.Since(h.start)
	c.st.hold.observe(held)
	if c.onHold != nil {
		c.onHold(c.name, held)
	}
}

// take takes the class's gate and then a pool connection for one call, into
// h, and returns the context the work runs under. On error h holds nothing.
func (c *ClassDB) take(ctx context.Context, h *hold) (context.Context, error) {
	wctx, err := c.acquire(ctx, h)
	if err != nil {
		return nil, err
	}
	conn, err := c.pool.Acquire(wctx)
	if err != nil {
		h.release()
		return nil, err
	}
	h.conn, h.pgc = conn, conn.Conn()
	return wctx, nil
}

// acquire takes the class's gate for one call and returns the context the
// work runs under. For an unlimited class it returns ctx and leaves h zero.
func (c *ClassDB) acquire(ctx context.Context, h *hold) (context.Context, error) {
	if c.err != nil {
		return nil, c.err
	}
	c.st.calls.Add(1)
	if c.gate == nil {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		c.st.canceled.Add(1)
		return nil, err
	}
	if c.local != nil && c.local.TryAcquire(c.n) {
		c.granted(h, time.Now())
		return ctx, nil
	}
	// Checked only when there is no room, so that a grant reads no limit
	// (semaphore.Weighted.Limit takes its lock). The limit can change at
	// run time (SetLimit), hence per call and not only in New.
	if c.tooLarge() {
		c.st.tooLarge.Add(1)
		return nil, &RejectError{Reason: ErrTooLarge}
	}
	c.st.waiting.Add(1)
	start := time.Now()
	wctx, err := c.wait(ctx, h)
	c.st.waiting.Add(-1)
	now := time.Now()
	waited := now.Sub(start)
	c.st.wait.observe(waited)
	if err != nil {
		return nil, c.refused(ctx, err)
	}
	if c.onWait != nil {
		c.onWait(c.name, waited)
	}
	c.granted(h, now)
	return wctx, nil
}

// granted records a grant at now into h.
func (c *ClassDB) granted(h *hold, now time.Time) {
	h.c, h.start = c, now
	c.st.inUse.Add(c.n)
	c.st.admitted.Add(1)
}

// tooLarge reports whether the class's weight is above its gate's limit, if
// the gate reports one.
func (c *ClassDB) tooLarge() bool { return c.limit != nil && c.n > c.limit.Limit() }

// errNoRoom is what wait returns when the class's own MaxWait refused the
// call: no room with a negative MaxWait, or none within a positive one.
var errNoRoom = errors.New("bulkheadpgx: no room")

// wait waits for the gate after the fast path found no room: not at all if
// MaxWait is negative, as long as ctx allows if it is zero, at most MaxWait
// if it is positive.
func (c *ClassDB) wait(ctx context.Context, h *hold) (context.Context, error) {
	if c.local != nil {
		switch {
		case c.maxWait < 0:
			return nil, errNoRoom
		case c.maxWait == 0:
			return ctx, c.local.Acquire(ctx, c.n)
		}
		wctx, cancel := context.WithTimeout(ctx, c.maxWait)
		err := c.local.Acquire(wctx, c.n)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = errNoRoom // our bound, not the caller's
		}
		cancel()
		return ctx, err
	}
	if c.maxWait <= 0 {
		take := c.gate.Hold
		if c.maxWait < 0 {
			take = c.try.TryHold // non-nil: checked in New
		}
		wctx, rel, err := take(ctx, c.n)
		h.rel = rel
		return wctx, err
	}
	// MaxWait bounds the wait, not the work: the gate gets a context that a
	// timer cancels only if the grant has not come by then, and the work
	// runs under what the gate returns (derived from that context, so that a
	// lost lease can cancel it). state: 0 waiting, 1 granted, 2 timed out.
	var state atomic.Int32
	gctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(c.maxWait, func() {
		if state.CompareAndSwap(0, 2) {
			cancel()
		}
	})
	wctx, rel, err := c.gate.Hold(gctx, c.n)
	t.Stop()
	if err == nil && !state.CompareAndSwap(0, 1) {
		rel() // granted just as the wait timed out: give it back
		err = errNoRoom
	}
	if err != nil {
		cancel()
		if state.Load() == 2 && ctx.Err() == nil {
			err = errNoRoom
		}
		return nil, err
	}
	h.rel, h.cancel = rel, cancel
	return wctx, nil
}

// refused turns a failed wait into the call's error: ctx.Err() if the
// caller's context ended, else a *RejectError, or the gate's own error
// wrapped when it is not a refusal (a store failure).
func (c *ClassDB) refused(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		c.st.canceled.Add(1)
		return ctx.Err()
	}
	if errors.Is(err, semaphore.ErrTooLarge) || errors.Is(err, ErrTooLarge) {
		c.st.tooLarge.Add(1)
		return &RejectError{Reason: ErrTooLarge}
	}
	if err == errNoRoom {
		c.st.maxWait.Add(1)
		return &RejectError{Reason: ErrMaxWait, Delay: c.retry}
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		c.st.maxWait.Add(1)
		d := ra.RetryAfter()
		if d <= 0 {
			d = c.retry
		}
		return &gateRejectError{RejectError{Reason: ErrMaxWait, Delay: d}, err}
	}
	c.st.errors.Add(1)
	return fmt.Errorf("bulkheadpgx: class %s: %w", c.name, err)
}

// gateRejectError is a refusal by the gate itself: ErrMaxWait on the outside,
// the gate's error (semaphore.ErrQueueFull, distsem.ErrNoCapacity,
// breaker.ErrUnavailable, ...) underneath for errors.Is.
type gateRejectError struct {
	RejectError
	gate error
}

func (e *gateRejectError) Unwrap() []error { return []error{e.Reason, e.gate} }

// As lets errors.As find the *RejectError.
func (e *gateRejectError) As(target any) bool {
	if p, ok := target.(**RejectError); ok {
		*p = &e.RejectError
		return true
	}
	return false
}

// Query runs sql in the class, like pgxpool.Pool.Query. The gate is held
// until the returned Rows are closed, by Close or by Next returning false.
// If the gate is not granted it returns a *RejectError (ErrMaxWait,
// ErrTooLarge) or ctx.Err(), holding nothing; if the query fails, the gate is
// given back before Query returns. Either way, as with pgxpool, the Rows are
// not nil: they carry the error (Err, Scan and Values return it, Next
// reports false, Close does nothing), so pgx.CollectRows(rows, ...) on them
// returns it too.
func (c *ClassDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.Query(ctx, sql, args...)
	}
	r := &rows{}
	wctx, err := c.take(ctx, &r.h)
	if err != nil {
		return errRows{err}, err
	}
	ok := false
	defer func() {
		if !ok {
			r.h.release()
		}
	}()
	r.Rows, err = r.h.conn.Query(wctx, sql, args...)
	if err != nil {
		return errRows{err}, err
	}
	ok = true
	return r, nil
}

// QueryRow runs sql in the class, like pgxpool.Pool.QueryRow. The gate is
// held until Scan returns (or panics). A refusal is returned by Scan.
func (c *ClassDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.QueryRow(ctx, sql, args...)
	}
	r := &row{}
	wctx, err := c.take(ctx, &r.h)
	if err != nil {
		return errRow{err}
	}
	ok := false
	defer func() {
		if !ok {
			r.h.release()
		}
	}()
	r.Row = r.h.conn.QueryRow(wctx, sql, args...)
	ok = true
	return r
}

// Exec runs sql in the class, like pgxpool.Pool.Exec, holding the gate while
// it runs.
func (c *ClassDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.Exec(ctx, sql, args...)
	}
	var h hold
	wctx, err := c.take(ctx, &h)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer h.release()
	return h.conn.Exec(wctx, sql, args...)
}

// CopyFrom runs a COPY in the class, like pgxpool.Pool.CopyFrom, holding the
// gate while it runs.
func (c *ClassDB) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.CopyFrom(ctx, tableName, columnNames, rowSrc)
	}
	var h hold
	wctx, err := c.take(ctx, &h)
	if err != nil {
		return 0, err
	}
	defer h.release()
	return h.pgc.CopyFrom(wctx, tableName, columnNames, rowSrc)
}

// Begin starts a transaction in the class, like pgxpool.Pool.Begin. The gate
// is held until Commit or Rollback returns.
func (c *ClassDB) Begin(ctx context.Context) (pgx.Tx, error) {
	return c.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx starts a transaction in the class, like pgxpool.Pool.BeginTx. The
// gate is held until Commit or Rollback returns. On error the Tx is nil, as
// pgxpool's is, and nothing is held. A lost fleet lease cancels the context
// of BEGIN only: later statements run under their own contexts.
func (c *ClassDB) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.BeginTx(ctx, txOptions)
	}
	t := &ownTx{}
	wctx, err := c.take(ctx, &t.h)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			t.h.release()
		}
	}()
	inner, err := t.h.conn.BeginTx(wctx, txOptions)
	if err != nil {
		return nil, err
	}
	t.tx = tx{Tx: inner, h: &t.h}
	ok = true
	return &t.tx, nil
}

// SendBatch sends a batch in the class, like pgxpool.Pool.SendBatch. The
// gate is held until the BatchResults are closed or, for a batch that began
// a transaction (pgx.Batch.BeginTx), until that transaction's Commit or
// Rollback. A refusal is returned as pgxpool returns its own: by every
// method of the BatchResults (pgx.FailedBatchResults), whose Tx, for a batch
// that began a transaction, is a closed transaction (Commit and Rollback
// return pgx.ErrTxClosed), so that a deferred br.Tx().Rollback(ctx) is safe.
func (c *ClassDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.SendBatch(ctx, b)
	}
	br := &batch{}
	wctx, err := c.take(ctx, &br.h)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	ok := false
	defer func() {
		if !ok {
			br.h.release()
		}
	}()
	br.BatchResults = br.h.conn.SendBatch(wctx, b)
	if t := br.BatchResults.Tx(); t != nil {
		br.tx = &tx{Tx: t, h: &br.h}
	}
	ok = true
	return br
}

// Acquire takes a connection in the class, like pgxpool.Pool.Acquire. The
// gate is held until Conn.Release (or Conn.Hijack). On error the Conn is
// nil, as pgxpool's is, and nothing is held. A lost fleet lease cancels the
// context of the pool's acquire only.
func (c *ClassDB) Acquire(ctx context.Context) (*Conn, error) {
	cn := &Conn{}
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		pc, err := c.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		cn.Conn, cn.h.conn, cn.h.pgc = pc, pc, pc.Conn()
		return cn, nil
	}
	if _, err := c.take(ctx, &cn.h); err != nil {
		return nil, err
	}
	cn.Conn = cn.h.conn
	return cn, nil
}

// AcquireFunc takes a connection in the class and calls f with it, like
// pgxpool.Pool.AcquireFunc, holding the gate until f returns or panics.
func (c *ClassDB) AcquireFunc(ctx context.Context, f func(*pgxpool.Conn) error) error {
	if c.gate == nil && c.err == nil {
		c.st.calls.Add(1)
		return c.pool.AcquireFunc(ctx, f)
	}
	var h hold
	if _, err := c.take(ctx, &h); err != nil {
		return err
	}
	defer h.release()
	return f(h.conn)
}

// Query runs sql in the default class; see ClassDB.Query.
func (db *DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return db.def.Query(ctx, sql, args...)
}

// QueryRow runs sql in the default class; see ClassDB.QueryRow.
func (db *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.def.QueryRow(ctx, sql, args...)
}

// Exec runs sql in the default class; see ClassDB.Exec.
func (db *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return db.def.Exec(ctx, sql, args...)
}

// CopyFrom runs a COPY in the default class; see ClassDB.CopyFrom.
func (db *DB) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	return db.def.CopyFrom(ctx, tableName, columnNames, rowSrc)
}

// Begin starts a transaction in the default class; see ClassDB.Begin.
func (db *DB) Begin(ctx context.Context) (pgx.Tx, error) { return db.def.Begin(ctx) }

// BeginTx starts a transaction in the default class; see ClassDB.BeginTx.
func (db *DB) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	return db.def.BeginTx(ctx, txOptions)
}

// SendBatch sends a batch in the default class; see ClassDB.SendBatch.
func (db *DB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return db.def.SendBatch(ctx, b)
}

// Acquire takes a connection in the default class; see ClassDB.Acquire.
func (db *DB) Acquire(ctx context.Context) (*Conn, error) { return db.def.Acquire(ctx) }

// AcquireFunc runs f with a connection in the default class; see
// ClassDB.AcquireFunc.
func (db *DB) AcquireFunc(ctx context.Context, f func(*pgxpool.Conn) error) error {
	return db.def.AcquireFunc(ctx, f)
}

// Ping pings the database through the pool, in no class.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }
