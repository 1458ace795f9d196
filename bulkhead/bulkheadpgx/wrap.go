package bulkheadpgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rows holds the gate until the rows are closed: by Close, or by Next
// returning false (pgx closes rows itself at their end or on an error).
type rows struct {
	pgx.Rows
	h hold
}

func (r *rows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.h.release()
	return false
}

func (r *rows) Close() {
	r.Rows.Close()
	r.h.release()
}

// row holds the gate until Scan returns.
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

// tx holds the gate until Commit or Rollback returns (the pool's
// connection is released then too, whatever their error). A nested
// transaction (Begin on the Tx, a savepoint) is the pgx one: it runs on the
// connection the outer transaction already holds.
type tx struct {
	pgx.Tx
	h hold
}

func (t *tx) Commit(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Commit(ctx)
}

func (t *tx) Rollback(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Rollback(ctx)
}

// batch holds the gate until the results are closed, or, for a batch that
// began a transaction (pgx.Batch.BeginTx), until that transaction's Commit or
// Rollback.
type batch struct {
	pgx.BatchResults
	h hold
}

func (b *batch) Close() error {
	err := b.BatchResults.Close()
	if b.BatchResults.Tx() == nil {
		b.h.release()
	}
	return err
}

func (b *batch) Tx() pgx.Tx {
	t := b.BatchResults.Tx()
	if t == nil {
		return nil
	}
	return &batchTx{Tx: t, h: &b.h}
}

// batchTx is the transaction a batch began: it holds its batch's gate.
type batchTx struct {
	pgx.Tx
	h *hold
}

func (t *batchTx) Commit(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Commit(ctx)
}

func (t *batchTx) Rollback(ctx context.Context) error {
	defer t.h.release()
	return t.Tx.Rollback(ctx)
}

// errBatch is the BatchResults of a refused SendBatch.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// A Conn is a connection taken from the pool in a class, holding the class's
// gate until Release. It has the methods of *pgxpool.Conn (embedded); its
// statements run under the permit it already holds.
type Conn struct {
	*pgxpool.Conn
	h hold
}

// Release returns the connection to the pool and gives the class's gate
// back. Like pgxpool.Conn.Release it is safe to call more than once.
func (c *Conn) Release() {
	if c.Conn != nil {
		c.Conn.Release()
	}
	c.h.release()
}
