package distsem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

var errFn = errors.New("fn failed")

// TestTryDo: TryDo runs fn holding the permit and returns fn's error; while
// the permit is held a second TryDo is refused at once, with TryAcquire's
// *RejectError and without calling fn; afterwards nothing is held and fn's
// context has ended with ErrReleased.
func TestTryDo(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{})
	ctx := t.Context()
	var fctx context.Context
	var refusal error
	var refusalTook time.Duration
	err := s.TryDo(ctx, 1, func(c context.Context) error {
		fctx = c
		if c.Err() != nil {
			t.Errorf("fn's context done while the permit is held: %v", context.Cause(c))
		}
		if st := stats(t, s); st.InUse != 1 {
			t.Errorf("InUse inside fn = %d, want 1", st.InUse)
		}
		// A bound, so that a TryDo that waits fails instead of hanging.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		refusal = s.TryDo(rctx, 1, func(context.Context) error {
			t.Error("TryDo on a full semaphore called fn")
			return nil
		})
		refusalTook = time.Since(start)
		return errFn
	})
	if err != errFn {
		t.Errorf("TryDo(ctx, 1, fn) = %v, want fn's error", err)
	}
	if !errors.Is(refusal, distsem.ErrNoCapacity) {
		t.Errorf("TryDo on a full semaphore = %v, want ErrNoCapacity", refusal)
	}
	if _, ok := errors.AsType[*distsem.RejectError](refusal); !ok {
		t.Errorf("TryDo on a full semaphore = %T, want a *RejectError", refusal)
	}
	if refusalTook > time.Second {
		t.Errorf("TryDo on a full semaphore took %v, want one round trip", refusalTook)
	}
	if fctx == nil {
		t.Fatal("fn not called on a free semaphore")
	}
	if cause := context.Cause(fctx); !errors.Is(cause, distsem.ErrReleased) {
		t.Errorf("fn's context cause after TryDo returned = %v, want ErrReleased", cause)
	}
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 || st.Waiting != 0 {
		t.Errorf("after TryDo: %+v, want nothing held or waiting", st)
	}
	if ls := s.LocalStats(); ls.Held != 0 || ls.Acquired != 1 || ls.RejectedNoCapacity != 1 {
		t.Errorf("LocalStats after TryDo = %+v, want Held 0, Acquired 1, RejectedNoCapacity 1", ls)
	}
}

// TestTryDoTooLarge: an n above the limit is refused without I/O and fn is
// not called.
func TestTryDoTooLarge(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{})
	err := s.TryDo(t.Context(), 3, func(context.Context) error {
		t.Error("TryDo(ctx, 3) of 2 called fn")
		return nil
	})
	if !errors.Is(err, distsem.ErrTooLarge) {
		t.Errorf("TryDo(ctx, 3) of 2 = %v, want ErrTooLarge", err)
	}
}

// TestTryDoPanicReleases: a panic in fn propagates to TryDo's caller and the
// permit is released.
func TestTryDoPanicReleases(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		s.TryDo(t.Context(), 1, func(context.Context) error { panic("boom") })
		t.Error("TryDo returned after fn panicked")
	}()
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 {
		t.Errorf("after fn panicked: %+v, want nothing held", st)
	}
	if err := s.TryDo(t.Context(), 1, func(context.Context) error { return nil }); err != nil {
		t.Errorf("TryDo after a panicking fn = %v, want nil (the permit was released)", err)
	}
}

// TestTryDoLostLeaseCancels: when Redis forgets the permit, the context fn
// runs under is cancelled with ErrLeaseLost while the caller's is not.
func TestTryDoLostLeaseCancels(t *testing.T) {
	db := redistest.Connect(t)
	const lease = 600 * time.Millisecond
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	ctx := t.Context()
	err := s.TryDo(ctx, 1, func(fctx context.Context) error {
		if err := db.Client.Del(ctx, s.Keys()...).Err(); err != nil {
			return err
		}
		select {
		case <-fctx.Done():
		case <-time.After(5 * lease):
			return errors.New("fn's context not cancelled within 5 leases of the permit vanishing from Redis")
		}
		if cause := context.Cause(fctx); !errors.Is(cause, distsem.ErrLeaseLost) {
			t.Errorf("fn's context cause = %v, want ErrLeaseLost", cause)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Errorf("caller's context done: %v", ctx.Err())
	}
	if st := stats(t, s); st.InUse != 0 || st.Lost != 1 {
		t.Errorf("after the lost permit's release: %+v, want nothing held, Lost 1", st)
	}
}

// TestKeyedTryDo: Keyed.TryDo runs fn holding key's permit, refuses a full
// key at once without calling fn while another key is admitted, and leaves
// no key live afterwards, also when fn panics.
func TestKeyedTryDo(t *testing.T) {
	db := redistest.Connect(t)
	k := newKeyed(t, db.Client, db.Prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	ran := 0
	err := k.TryDo(ctx, "a", 1, func(context.Context) error {
		ran++
		if st := k.Stats(); st.Held != 1 || st.Keys != 1 {
			t.Errorf("Stats inside fn = %+v, want Held 1, Keys 1", st)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		err := k.TryDo(rctx, "a", 1, func(context.Context) error {
			t.Error("TryDo on a full key called fn")
			return nil
		})
		if !errors.Is(err, distsem.ErrNoCapacity) {
			t.Errorf("TryDo on full key a = %v, want ErrNoCapacity", err)
		}
		if _, ok := errors.AsType[*distsem.RejectError](err); !ok {
			t.Errorf("TryDo on full key a = %T, want a *RejectError", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("TryDo on a full key took %v, want one round trip", d)
		}
		return k.TryDo(ctx, "b", 1, func(context.Context) error {
			ran++
			return errFn
		})
	})
	if err != errFn || ran != 2 {
		t.Errorf("TryDo nested over keys a and b = %v with %d fns run, want fn's error with 2 run", err, ran)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		k.TryDo(ctx, "a", 1, func(context.Context) error { panic("boom") })
	}()
	if st := k.Stats(); st.Held != 0 || st.Keys != 0 || st.Waiting != 0 {
		t.Errorf("Stats after TryDo = %+v, want nothing held, live or waiting", st)
	}
	if st := keyStats(t, db.Client, db.Prefix, "a"); st.InUse != 0 || st.Holders != 0 {
		t.Errorf("Redis state of key a after TryDo: %+v, want nothing held", st)
	}
	if err := k.TryDo(ctx, "", 1, func(context.Context) error { return nil }); !errors.Is(err, distsem.ErrInvalidKey) {
		t.Errorf("TryDo with an empty key = %v, want ErrInvalidKey", err)
	}
}
