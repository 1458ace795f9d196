package bulkheadpgx

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Class is a kind of query with its own cap: "reports", weight 1, at most
// 50 at once across the fleet, waiting at most 2 s; or "2 report queries at
// once per tenant".
type Class struct {
	// Name names the class in DB.Class, errors (RejectError.Layer), Stats
	// and events (Event.Part). Required, unique.
	Name string

	// N is the weight one call of this class holds on its gate. If zero, 1.
	// Negative panics in New.
	N int64

	// Gate caps the class: any floodgate.Gate, a *semaphore.Weighted for
	// one process, a *distsem.Semaphore for the fleet, an *adaptive.Gate
	// for a limit that finds itself from the latency (N at most its Min).
	// If Gate and KeyedGate are both nil, the class is unlimited: calls go
	// straight to the pool and only their number is counted.
	Gate floodgate.Gate

	// KeyedGate caps the class per key, with Key: a *semaphore.Keyed for one
	// process, a *distsem.Keyed for the fleet ("2 report queries at once per
	// tenant"). At most one of Gate and KeyedGate may be set.
	KeyedGate floodgate.KeyedGate

	// Key returns the key of a call from its context (a tenant that a
	// middleware put there). Required with KeyedGate, and only with it. It is
	// called once per call, before the gate is asked. A key the gate refuses
	// (distsem.ErrInvalidKey) fails the call with the gate's error, wrapped.
	// Keys are never in Stats or events (they are unbounded).
	Key func(ctx context.Context) string

	// MaxWait bounds how long a call waits for its gate, as everywhere in
	// floodgate. If positive, a call waits at most MaxWait (and never past
	// the caller's own deadline), then fails with a *RejectError matching
	// ErrMaxWait. If zero (the default), a call waits as long as its context
	// allows (and the gate's own configuration: a semaphore.Weighted's
	// MaxWait or MaxWaiters still apply). If negative, a call never waits:
	// one that finds no room fails at once with ErrMaxWait.
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

	// Observer, if non-nil, is told what each limited class does, with
	// Component floodgate.ComponentDB and Part the class's name: KindAdmit
	// when a call is granted its gate (Duration: the wait, 0 when it was
	// granted at once), KindRelease when the weight is given back (Duration:
	// the time from grant to release, as ClassStats.Hold), KindReject for a
	// refusal or a gate failure (Reason; Err: the *RejectError or the
	// wrapped failure; Duration: the wait), KindCancel when the caller's
	// context ended before the grant. N is the class's weight. An unlimited
	// class is not observed: it holds nothing. Observe is called without
	// locks held, on the goroutine that waited or released (for a destroyed
	// connection, the DB's goroutine that waits for its cleanup).
	Observer floodgate.Observer
}

// DBTX is what *pgxpool.Pool, *DB, *ClassDB, pgx.Tx and *pgx.Conn have in
// common, as sqlc's generated DBTX: code written against it runs unchanged
// on a pool, in a class, or inside a transaction. Acquire is left out on
// purpose: a class's Acquire returns a [*Conn] (which embeds
// *pgxpool.Conn) instead of a *pgxpool.Conn, because the class's weight is
// given back by Conn.Release and a *pgxpool.Conn's own Release cannot be
// intercepted; AcquireFunc, whose function gets a *pgxpool.Conn, has the
// pool's signature. BeginTx is left out so that pgx.Tx satisfies DBTX.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (*DB)(nil)
	_ DBTX = (*ClassDB)(nil)
	_ DBTX = pgx.Tx(nil)
	_ DBTX = (*pgx.Conn)(nil)
)

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
	gate    floodgate.KeyedGate          // nil for an unlimited class
	key     func(context.Context) string // nil for an unkeyed gate
	maxWait time.Duration
	retry   time.Duration
	obs     floodgate.Observer
	st      counters
	bg      *sync.WaitGroup // the DB's
}

// New returns a DB that runs queries on pool in cfg's classes. It does no
// I/O. It panics on a programmer error: a nil pool, a class without a Name or
// with a duplicate one, a negative N, both Gate and KeyedGate set, or Key set
// without KeyedGate or missing with it. A weight above the gate's limit is
// the gate's to refuse, on each call (ErrTooLarge).
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
		case c.Gate != nil && c.KeyedGate != nil:
			panic(what + "both Gate and KeyedGate")
		case (c.KeyedGate != nil) != (c.Key != nil):
			panic(what + "KeyedGate and Key go together")
		}
		cd := &ClassDB{pool: pool, name: c.Name, n: max(c.N, 1), key: c.Key,
			maxWait: c.MaxWait, retry: c.RetryAfter, obs: cfg.Observer, bg: &db.bg}
		if c.Gate != nil || c.KeyedGate != nil {
			cd.gate = gatewait.Keyed(c.Gate, c.KeyedGate)
		}
		if cd.retry <= 0 {
			cd.retry = time.Second
			if c.MaxWait > 0 {
				cd.retry = c.MaxWait
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

// Class returns the calls of class name. It panics if db has no such class:
// a misspelt name is a programmer error, so look the class up once where
// the code is wired (reports := db.Class("reports")) and the typo panics at
// start-up, not on some request.
//
// The class is chosen explicitly per call (reports.Query(...)) rather than
// carried in a context value: the choice is visible where the query is
// written, a context cannot silently carry a class into code that never
// meant to be limited (or drop it across a goroutine), and a handle can be
// looked up once and kept.
func (db *DB) Class(name string) *ClassDB {
	if c := db.classes[name]; c != nil {
		return c
	}
	panic(fmt.Sprintf("bulkheadpgx: unknown class %q", name))
}

// Name returns the class's name.
func (c *ClassDB) Name() string { return c.name }

// Query runs sql in the class, like pgxpool.Pool.Query. The gate is held
// until the returned Rows are closed, by Close or by Next returning false.
// If the gate is not granted it returns a *RejectError (ErrMaxWait,
// ErrTooLarge) or ctx.Err(), holding nothing; if the query fails, the gate is
// given back before Query returns. Either way, as with pgxpool, the Rows are
// not nil: they carry the error (Err, Scan and Values return it, Next
// reports false, Close does nothing), so pgx.CollectRows(rows, ...) on them
// returns it too.
func (c *ClassDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.Query(ctx, sql, args...)
	}
	r := &rows{}
	err := c.do(ctx, &r.h, true, func(ctx context.Context, conn *pgxpool.Conn) (err error) {
		r.Rows, err = conn.Query(ctx, sql, args...)
		return err
	})
	if err != nil {
		return errRows{err}, err
	}
	return r, nil
}

// QueryRow runs sql in the class, like pgxpool.Pool.QueryRow. The gate is
// held until Scan returns (or panics). A refusal is returned by Scan.
func (c *ClassDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.QueryRow(ctx, sql, args...)
	}
	r := &row{}
	if err := c.do(ctx, &r.h, true, func(ctx context.Context, conn *pgxpool.Conn) error {
		r.Row = conn.QueryRow(ctx, sql, args...)
		return nil
	}); err != nil {
		return errRow{err}
	}
	return r
}

// Exec runs sql in the class, like pgxpool.Pool.Exec, holding the gate while
// it runs.
func (c *ClassDB) Exec(ctx context.Context, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.Exec(ctx, sql, args...)
	}
	err = c.do(ctx, &hold{}, false, func(ctx context.Context, conn *pgxpool.Conn) (err error) {
		tag, err = conn.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// CopyFrom runs a COPY in the class, like pgxpool.Pool.CopyFrom, holding the
// gate while it runs.
func (c *ClassDB) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (n int64, err error) {
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.CopyFrom(ctx, tableName, columnNames, rowSrc)
	}
	err = c.do(ctx, &hold{}, false, func(ctx context.Context, conn *pgxpool.Conn) (err error) {
		n, err = conn.CopyFrom(ctx, tableName, columnNames, rowSrc)
		return err
	})
	return n, err
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
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.BeginTx(ctx, txOptions)
	}
	t := &ownTx{}
	if err := c.do(ctx, &t.h, true, func(ctx context.Context, conn *pgxpool.Conn) error {
		inner, err := conn.BeginTx(ctx, txOptions)
		t.tx = tx{Tx: inner, h: &t.h}
		return err
	}); err != nil {
		return nil, err
	}
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
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.SendBatch(ctx, b)
	}
	br := &batch{}
	if err := c.do(ctx, &br.h, true, func(ctx context.Context, conn *pgxpool.Conn) error {
		br.BatchResults = conn.SendBatch(ctx, b)
		if t := br.BatchResults.Tx(); t != nil {
			br.tx = &tx{Tx: t, h: &br.h}
		}
		return nil
	}); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// Acquire takes a connection in the class, like pgxpool.Pool.Acquire, but
// returns a [*Conn], which embeds the *pgxpool.Conn: the gate is held until
// Conn.Release (or Conn.Hijack), and a *pgxpool.Conn's own Release could not
// give it back. On error the Conn is nil, as pgxpool's is, and nothing is
// held. A lost fleet lease cancels the context of the pool's acquire only.
func (c *ClassDB) Acquire(ctx context.Context) (*Conn, error) {
	cn := &Conn{}
	if c.gate == nil {
		c.st.calls.Add(1)
		pc, err := c.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		cn.Conn, cn.h.conn, cn.h.pgc = pc, pc, pc.Conn()
		return cn, nil
	}
	if err := c.do(ctx, &cn.h, true, nil); err != nil {
		return nil, err
	}
	cn.Conn = cn.h.conn
	return cn, nil
}

// AcquireFunc takes a connection in the class and calls f with it, like
// pgxpool.Pool.AcquireFunc, holding the gate until f returns or panics.
func (c *ClassDB) AcquireFunc(ctx context.Context, f func(*pgxpool.Conn) error) error {
	if c.gate == nil {
		c.st.calls.Add(1)
		return c.pool.AcquireFunc(ctx, f)
	}
	return c.do(ctx, &hold{}, false, func(_ context.Context, conn *pgxpool.Conn) error { return f(conn) })
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
