// Package bulkheadpgx caps query classes on a pgxpool.Pool: "at most 50
// expensive report queries against the replica across all pods; cheap
// queries unlimited; a report query that cannot start within 2 s fails fast".
// pgxpool has neither an acquire timeout nor a per-class limit.
//
//	fleet := distsem.New(rdb, "replica-reports", 50, distsem.Config{})
//	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
//		{Name: "reports", Gate: fleet, MaxWait: 2 * time.Second},
//	}})
//	reports := db.Class("reports")                   // once, at wiring: a typo panics here
//	rows, err := reports.Query(ctx, "SELECT ...")    // capped
//	n, err := db.Exec(ctx, "UPDATE ...")             // default class: unlimited
//
// # Classes
//
// A [Class] has a weight (N), a gate and a MaxWait. The gate is any
// floodgate.Gate (a *semaphore.Weighted for one process, a
// *distsem.Semaphore for the fleet, an *adaptive.Gate whose limit follows
// the queries' latency, used as they are), or a
// floodgate.KeyedGate with a Key function that picks the key from the call's
// context ("2 report queries at once per tenant": a *semaphore.Keyed or a
// *distsem.Keyed), or none for an unlimited class. The class is chosen
// explicitly per call with [DB.Class], whose result has the pool's methods;
// the [DB]'s own methods run in the default class. DB.Class panics for a
// name the DB was not configured with (a programmer error): look classes up
// once, where the code is wired.
//
// [DB] and [ClassDB] have the signatures of pgxpool.Pool's Query, QueryRow,
// Exec, CopyFrom, Begin, BeginTx, SendBatch and AcquireFunc, so code moves
// over by changing one type, or by typing it to [DBTX] (Exec, Query,
// QueryRow, SendBatch, CopyFrom, Begin: what sqlc's generated code needs),
// which *pgxpool.Pool, *DB, *ClassDB, pgx.Tx and *pgx.Conn all satisfy.
// Acquire is the one method that differs: it returns a [*Conn], which embeds
// *pgxpool.Conn, because the class's weight is given back by Conn.Release.
//
// # How long the gate is held
//
// Exactly as long as pgxpool holds the connection the work runs on: until
// the Rows are closed (by Close, by Next returning false at their end or on
// an error, or by a Scan or Values that fails), Row.Scan returns or panics,
// Tx.Commit or Rollback returns, BatchResults.Close returns (or, for a batch
// that began a transaction, its Commit or Rollback), Conn.Release or
// Conn.Hijack, or AcquireFunc's function returns or panics. A call that
// fails gives it back before returning. As with pgxpool's connections,
// Rows, a Row or a Tx that is never closed, scanned or ended holds the gate
// forever.
//
// The cap holds at the database, as pgxpool's MaxConns does. When a call's
// context ends mid-query, pgx returns at once, but PostgreSQL is still
// running the query: pgconn closes the connection and, in the background,
// sends a cancel request and waits for the server to end the session. The
// pool frees a destroyed connection's slot only then, and a class gives its
// permit back only then too (on a goroutine of the DB, which [DB.Close]
// waits for; at most 15 s, pgxpool's own bound), so the next call of a full
// class never runs beside a query that is still being cancelled. Meanwhile
// ClassStats.InUse still counts the permit.
//
// An *adaptive.Gate measures exactly this hold: each call's hold time is
// its latency sample. A call whose context's deadline passes (pgx cancels
// the query) counts as a drop, a sign of overload, when its weight comes
// back; one whose context is cancelled counts as nothing. An error from the
// server, a statement_timeout included, ends the hold like a result does: a
// sample of its hold time. The hold includes the wait for a pool
// connection, so a pool smaller than the gate's Max (pgxpool's default
// MaxConns is 4, or the number of CPUs) is a limit the gate finds: size
// the pool above it.
//
// A gate's work context: a fleet gate's Hold returns a context that is
// cancelled when its lease is lost, and Query, QueryRow, Exec, CopyFrom,
// SendBatch and AcquireFunc run under it, so the lost lease cancels the
// query. Statements of a Tx or a Conn take their own contexts: there the
// lease's context covers only BEGIN or the pool's acquire.
//
// # Refusals and errors: what pgxpool returns
//
// Every error path returns what pgxpool returns on its own error path, so
// code written against *pgxpool.Pool behaves the same through a class,
// including when the class refuses: a refused or failed Query returns
// non-nil Rows that carry the error (pgx's documented
// rows, _ := db.Query(...); pgx.CollectRows(rows, ...) returns it); a
// refused QueryRow returns a Row whose Scan returns it; a refused SendBatch
// returns pgx.FailedBatchResults, whose Tx, for a batch that began a
// transaction (pgx.Batch.BeginTx), is a closed transaction, so a deferred
// br.Tx().Rollback(ctx) returns pgx.ErrTxClosed instead of panicking;
// Begin, BeginTx and Acquire return nil and the error, as pgxpool does. A
// differential test holds every entry point, refused and failing, to
// pgxpool's behaviour.
//
// MaxWait means what it means everywhere in floodgate (it is applied by the
// same code as in bulkhead's layers and Workers): a positive MaxWait bounds
// the wait for the class's gate, zero (the default) waits as long as the
// caller's context allows (and the gate's own configuration), and a negative
// one never waits. A call refused by MaxWait, or by the gate itself (its
// queue bound, its deadline estimate), fails with a [*RejectError] matching
// [ErrMaxWait] (and the gate's error), with RetryAfter and the class's name
// as Layer, and holds nothing; the caller's own deadline is never extended.
// A weight the gate refuses as above its limit fails with [ErrTooLarge]; the
// caller's context ending while it waits returns ctx.Err(), as pgxpool's
// acquire does.
//
// # Stats
//
// [DB.Stats] gives per class: calls, weight in use, callers waiting, wait and
// hold time histograms, and refusals by reason, beside pgxpool's own Stat.
// Config.Observer is told of each grant, release, refusal and cancellation
// (floodgate.Event, Component "db", Part the class's name); otelfloodgate
// turns that into metrics.
//
// A DB is safe for simultaneous use by multiple goroutines. An unlimited
// class adds no allocation to a call.
package bulkheadpgx
