package bulkheadpgx

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A hold is what one call of a limited class holds: the class's weight, from
// its grant, and the pool connection the call runs on, until release. The
// call's result (rows, row, tx, batch, Conn) owns it and releases it where
// pgxpool releases its connection.
type hold struct {
	c     *ClassDB       // nil until the gate is granted (and for an unlimited Conn)
	held  floodgate.Held // the gate's weight
	start time.Time      // of the grant
	conn  *pgxpool.Conn  // nil until the call has a connection, and after a Hijack
	pgc   *pgx.Conn      // conn.Conn(), kept: readable after a Hijack
	done  atomic.Bool    // released: a local gate's Held.Release is not idempotent
}

// do is the one way a call of a limited class holds its gate for as long as
// its database work: it takes the gate and then a pool connection into h,
// runs f (if non-nil) on the connection under the work's context, and gives
// both back before it returns, unless keep is set and f succeeded: then what
// f made (Rows, a Row, a Tx, BatchResults, a Conn) owns h and releases it
// when it ends. A panic in f gives both back too. On a refusal nothing is
// held and f is not called.
func (c *ClassDB) do(ctx context.Context, h *hold, keep bool, f func(ctx context.Context, conn *pgxpool.Conn) error) error {
	wctx, err := c.acquire(ctx, h)
	if err != nil {
		return err
	}
	conn, err := c.pool.Acquire(wctx)
	if err != nil {
		h.release()
		return err
	}
	h.conn, h.pgc = conn, conn.Conn()
	kept := false
	defer func() {
		if !kept {
			h.release()
		}
	}()
	if f != nil {
		err = f(wctx, conn)
	}
	kept = keep && err == nil
	return err
}

// acquire takes the class's gate for one call, into h, through gatewait (the
// one place MaxWait is applied), and returns the context the work runs
// under: the Held's (a fleet gate cancels it when its lease is lost).
func (c *ClassDB) acquire(ctx context.Context, h *hold) (context.Context, error) {
	c.st.calls.Add(1)
	if ctx.Err() != nil {
		return nil, c.canceled(ctx, 0)
	}
	var key string
	if c.key != nil {
		key = c.key(ctx)
	}
	held, waited, err := gatewait.Take(ctx, c.gate, key, c.n, c.maxWait, ErrMaxWait, &c.st.waits)
	if waited > 0 || err != nil {
		c.st.wait.observe(waited)
	}
	if err != nil {
		return nil, c.refused(ctx, waited, err)
	}
	// InUse after the grant, so that it never reads above what the gate
	// allows.
	h.c, h.held, h.start = c, held, time.Now()
	c.st.inUse.Add(c.n)
	c.st.admitted.Add(1)
	if c.obs != nil {
		c.emit(floodgate.KindAdmit, waited, "", nil)
	}
	return held.Context(), nil
}

// canceled counts a call whose context ended before its grant and returns
// ctx.Err(), as pgxpool's acquire does.
func (c *ClassDB) canceled(ctx context.Context, waited time.Duration) error {
	c.st.canceled.Add(1)
	if c.obs != nil {
		c.emit(floodgate.KindCancel, waited, "", nil)
	}
	return ctx.Err()
}

// refused turns what gatewait.Take failed with into the call's error:
// ctx.Err() if the caller's context ended; a *RejectError matching
// ErrMaxWait for the class's MaxWait or for the gate's own refusal (its
// error wrapped, its delay kept), or matching ErrTooLarge for a weight the
// gate can never admit; or the gate's failure (a store error, an invalid
// key) wrapped with the class's name.
func (c *ClassDB) refused(ctx context.Context, waited time.Duration, err error) error {
	if ctx.Err() != nil {
		return c.canceled(ctx, waited)
	}
	re := &RejectError{Reason: floodgate.ReasonMaxWait, Err: ErrMaxWait, Delay: c.retry, Layer: c.name}
	gre, isReject := errors.AsType[*RejectError](err)
	switch {
	case errors.Is(err, ErrMaxWait): // the class's own bound
		if d := reject.RetryAfter(err); d > 0 {
			re.Delay = d
		}
	case reject.ReasonOf(err) == floodgate.ReasonTooLarge:
		re.Reason, re.Err, re.Delay = floodgate.ReasonTooLarge, fmt.Errorf("%w: %w", ErrTooLarge, err), 0
	case isReject:
		re.Err = fmt.Errorf("%w: %w", ErrMaxWait, err)
		if gre.Delay > 0 {
			re.Delay = gre.Delay
		}
	default:
		c.st.errors.Add(1)
		err = fmt.Errorf("bulkheadpgx: class %s: %w", c.name, err)
		if c.obs != nil {
			c.emit(floodgate.KindReject, waited, reject.ReasonOf(err), err)
		}
		return err
	}
	if re.Reason == floodgate.ReasonTooLarge {
		c.st.tooLarge.Add(1)
	} else {
		c.st.maxWait.Add(1)
	}
	if c.obs != nil {
		c.emit(floodgate.KindReject, waited, re.Reason, re)
	}
	return re
}

// emit tells the Observer (non-nil) about one call of the class.
func (c *ClassDB) emit(k floodgate.Kind, d time.Duration, reason floodgate.Reason, err error) {
	c.obs.Observe(floodgate.Event{Kind: k, Component: floodgate.ComponentDB, Part: c.name, N: c.n,
		Duration: d, Reason: reason, Err: err})
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
	// InUse and the Observer first, then the gate: a call is counted (and an
	// observer's admits less releases count it) only while its weight is
	// really held, so neither reads above what the gate allows.
	c.st.inUse.Add(-c.n)
	held := time.Since(h.start)
	c.st.hold.observe(held)
	if c.obs != nil {
		c.emit(floodgate.KindRelease, held, "", nil)
	}
	h.held.Release()
}
