package bulkheadpgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The results of a class's calls mirror pgxpool's (pgxpool/rows.go,
// batch_results.go, tx.go): they run on a connection taken from the pool and
// give it back, and the class's weight with it, exactly where pgxpool gives
// its connection back.

// rows holds the gate until the rows are closed: by Close, by Next returning
// false, or by a failed Scan or Values, as pgxpool's rows release their
// connection.
type rows struct {
	pgx.Rows
	h hold
}

func (r *rows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *rows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	if err != nil {
		r.Close()
	}
	return err
}

func (r *rows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	if err != nil {
		r.Close()
	}
	return v, err
}

// Close closes the rows and gives the connection and the gate back. It is
// safe to call more than once.
func (r *rows) Close() {
	r.Rows.Close()
	r.h.release()
}

// errRows are the Rows of a refused or failed Query, as pgxpool's: they
// carry the error.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (e errRows) Err() error                                 { return e.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (e errRows) Scan(...any) error                          { return e.err }
func (e errRows) Values() ([]any, error)                     { return nil, e.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }

// row holds the gate until Scan returns or panics.
type row struct {
	pgx.Row
	h hold
}

func (r *row) Scan(dest ...any) error {
	defer r.h.release()
	return r.Row.Scan(dest...)
}

// errRow is the Row of a refused QueryRow.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// tx holds the gate until Commit or Rollback returns, whatever their error,
// as pgxpool's Tx releases its connection. A nested transaction (Begin on
// the Tx, a savepoint) is the pgx one: it runs on the connection the outer
// transaction already holds.
type tx struct {
	pgx.Tx
	h *hold
}

func (t *tx) Commit(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Commit(ctx)
}

func (t *tx) Rollback(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Rollback(ctx)
}

// ownTx is a transaction begun by BeginTx, with the hold it owns.
type ownTx struct {
	tx tx
	h  hold
}

// batch holds the gate until the results are closed, or, for a batch that
// began a transaction (pgx.Batch.BeginTx), until that transaction's Commit or
// Rollback, as pgxpool's batch results hold their connection.
type batch struct {
	pgx.BatchResults
	h  hold
	tx *tx // nil unless the batch began a transaction
}

func (b *batch) Close() error {
	err := b.BatchResults.Close()
	if b.tx == nil {
		b.h.release()
	}
	return err
}

func (b *batch) Tx() pgx.Tx {
	if b.tx == nil {
		return nil
	}
	return b.tx
}

// A Conn is a connection taken from the pool in a class, holding the class's
// gate until Release. It has the methods of *pgxpool.Conn (embedded); its
// statements run under the permit it already holds. The zero Conn is not
// usable; get one from Acquire.
type Conn struct {
	*pgxpool.Conn
	h hold
}

// Release returns the connection to the pool and gives the class's gate
// back (once the connection is closed, if the pool destroys it). Like
// pgxpool.Conn.Release it is safe to call more than once.
func (c *Conn) Release() { c.h.release() }

// Hijack takes the connection out of the pool, as pgxpool.Conn.Hijack does,
// and gives the class's gate back: the class no longer counts what runs on
// a connection the pool has let go of. The caller must close it. Like
// pgxpool.Conn.Hijack it panics on a released or hijacked connection.
func (c *Conn) Hijack() *pgx.Conn {
	pc := c.Conn.Hijack()
	c.h.conn = nil // not the pool's any more: release gives back only the weight
	c.h.release()
	return pc
}
