package distsem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// The distributed semaphores are gates of the one contract too.
var (
	_ floodgate.Gate      = (*distsem.Semaphore)(nil)
	_ floodgate.KeyedGate = (*distsem.Keyed)(nil)
)

// heldNothing reports whether h is the zero Held, which every error returns.
func heldNothing(h floodgate.Held) bool { return h.Context() == nil && h.N() == 0 }

// TestHoldReleaseTwice: Release frees the weight once, ends the work
// context with ErrReleased, and a second call frees nothing more: distsem's
// Held.Release is idempotent (a local semaphore's is not).
func TestHoldReleaseTwice(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{})
	ctx := t.Context()
	h, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatalf("Hold(ctx, 1) = %v, want nil", err)
	}
	wctx := h.Context()
	if h.N() != 1 {
		t.Errorf("Held.N() = %d, want 1", h.N())
	}
	if wctx.Err() != nil {
		t.Fatalf("work context done while the permit is held: %v", context.Cause(wctx))
	}
	other, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	h.Release()
	h.Release()
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrReleased) {
		t.Errorf("work context cause after release = %v, want ErrReleased", cause)
	}
	if ctx.Err() != nil {
		t.Errorf("caller's context done after release: %v", ctx.Err())
	}
	if st := stats(t, s); st.InUse != 1 || st.Holders != 1 {
		t.Fatalf("after release twice: %+v, want the other permit's 1 held", st)
	}
	if st := stats(t, s); st.Lost != 0 {
		t.Errorf("Stats.Lost = %d after an intentional release, want 0", st.Lost)
	}
}

// TestHoldLostLeaseCancelsContext: when Redis forgets the permit, its
// renewal loses the lease and the work context is cancelled with
// ErrLeaseLost, while the caller's context is not; release afterwards is
// harmless and keeps the cause.
func TestHoldLostLeaseCancelsContext(t *testing.T) {
	db := redistest.Connect(t)
	const lease = 600 * time.Millisecond
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	ctx := t.Context()
	h, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	wctx := h.Context()
	if err := db.Client.Del(ctx, s.Keys()...).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wctx.Done():
	case <-time.After(5 * lease):
		t.Fatal("work context not cancelled within 5 leases of the permit vanishing from Redis")
	}
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrLeaseLost) {
		t.Errorf("work context cause = %v, want ErrLeaseLost", cause)
	}
	if ctx.Err() != nil {
		t.Errorf("caller's context done: %v", ctx.Err())
	}
	h.Release()
	h.Release()
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrLeaseLost) {
		t.Errorf("work context cause after release = %v, want ErrLeaseLost kept", cause)
	}
	if st := stats(t, s); st.InUse != 0 || st.Lost != 1 {
		t.Errorf("after the lost permit's release: %+v, want nothing held, Lost 1", st)
	}
}

// TestHoldCallerCancel: the work context ends with the caller's; the permit
// is still held until release, which frees it although ctx is done.
func TestHoldCallerCancel(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	h, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wctx := h.Context()
	cancel()
	<-wctx.Done()
	if cause := context.Cause(wctx); cause != context.Canceled {
		t.Errorf("work context cause = %v, want context.Canceled", cause)
	}
	if st := stats(t, s); st.InUse != 1 {
		t.Fatalf("InUse before release = %d, want 1", st.InUse)
	}
	h.Release()
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 {
		t.Fatalf("after release with a done context: %+v, want nothing held", st)
	}
}

// TestHoldErrors: on error nothing is held (the zero Held).
func TestHoldErrors(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{})
	if got := s.Limit(); got != 2 {
		t.Errorf("Limit() = %d, want 2", got)
	}
	ctx := t.Context()
	if h, err := s.Hold(ctx, 3); !errors.Is(err, distsem.ErrTooLarge) || !heldNothing(h) {
		t.Errorf("Hold(ctx, 3) of 2 = (%+v, %v), want (zero Held, ErrTooLarge)", h, err)
	}
	h, err := s.Hold(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if h, err := s.Hold(dctx, 1); err != context.DeadlineExceeded || !heldNothing(h) {
		t.Errorf("Hold on a full semaphore until the deadline = (%+v, %v), want (zero Held, DeadlineExceeded)", h, err)
	}
	// The failed Hold withdraws its queue entry in the background.
	waitFor(t, 5*time.Second, "the failed Hold's queue entry withdrawn", func() bool { return stats(t, s).Waiting == 0 })
	if st := stats(t, s); st.InUse != 2 {
		t.Errorf("after the failed Hold: InUse %d, want 2 (the first Hold's)", st.InUse)
	}
	// SetLimit changes the stored limit, not the configured one.
	if err := s.SetLimit(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := s.Limit(); got != 2 {
		t.Errorf("Limit() after SetLimit(5) = %d, want the configured 2", got)
	}
}

// TestTryHold: TryHold takes free weight with Hold's context and release,
// and refuses at once, holding nothing, when there is none.
func TestTryHold(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 1, distsem.Config{})
	ctx := t.Context()
	h, err := s.TryHold(ctx, 1)
	if err != nil || h.N() != 1 {
		t.Fatalf("TryHold(ctx, 1) on a free semaphore = (%+v, %v), want a Held of 1", h, err)
	}
	wctx := h.Context()
	start := time.Now()
	if h, err := s.TryHold(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) || !heldNothing(h) {
		t.Errorf("TryHold(ctx, 1) on a full semaphore = (%+v, %v), want (zero Held, ErrNoCapacity)", h, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("TryHold on a full semaphore took %v, want one round trip", d)
	}
	h.Release()
	h.Release()
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrReleased) {
		t.Errorf("work context cause after release = %v, want ErrReleased", cause)
	}
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 || st.Waiting != 0 {
		t.Errorf("after release: %+v, want nothing held or waiting", st)
	}
}

// TestKeyedHold: a Keyed's Hold and TryHold take a key's weight as a Held
// whose Release gives it back once (idempotent) and lets the key go; the
// refusals hold nothing: ErrNoCapacity for a full key, ErrTooManyKeys for a
// new key beyond MaxKeys, ErrInvalidKey, ErrTooLarge.
func TestKeyedHold(t *testing.T) {
	db := redistest.Connect(t)
	k := newKeyed(t, db.Client, db.Prefix+"k:", 1, distsem.KeyedConfig{MaxKeys: 1})
	ctx := t.Context()
	h, err := k.Hold(ctx, "a", 1)
	if err != nil || h.N() != 1 {
		t.Fatalf(`Hold(ctx, "a", 1) = (%+v, %v), want a Held of 1`, h, err)
	}
	for _, c := range []struct {
		name string
		hold func() (floodgate.Held, error)
		want error
	}{
		{`TryHold(ctx, "a", 1): "a" full`, func() (floodgate.Held, error) { return k.TryHold(ctx, "a", 1) }, distsem.ErrNoCapacity},
		{`TryHold(ctx, "b", 1): beyond MaxKeys`, func() (floodgate.Held, error) { return k.TryHold(ctx, "b", 1) }, distsem.ErrTooManyKeys},
		{`Hold(ctx, "b", 1): beyond MaxKeys`, func() (floodgate.Held, error) { return k.Hold(ctx, "b", 1) }, distsem.ErrTooManyKeys},
		{`Hold(ctx, "", 1)`, func() (floodgate.Held, error) { return k.Hold(ctx, "", 1) }, distsem.ErrInvalidKey},
		{`TryHold(ctx, "a", 2): above the limit`, func() (floodgate.Held, error) { return k.TryHold(ctx, "a", 2) }, distsem.ErrTooLarge},
	} {
		got, err := c.hold()
		if !errors.Is(err, c.want) || !heldNothing(got) {
			t.Errorf("%s = (%+v, %v), want (zero Held, %v)", c.name, got, err, c.want)
		}
	}
	if st := k.Stats(); st.Keys != 1 || st.Held != 1 {
		t.Fatalf("Stats after the refusals = %+v, want 1 key, 1 held", st)
	}
	wctx := h.Context()
	h.Release()
	h.Release()
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrReleased) {
		t.Errorf("work context cause after release = %v, want ErrReleased", cause)
	}
	if st := k.Stats(); st.Keys != 0 || st.Held != 0 {
		t.Fatalf("Stats after Release twice = %+v, want no key live, nothing held", st)
	}
	// The key is gone: another takes its place, and "a" is free in Redis.
	b, err := k.TryHold(ctx, "b", 1)
	if err != nil {
		t.Fatalf(`TryHold(ctx, "b", 1) once "a" is released = %v, want nil`, err)
	}
	b.Release()
	a, err := k.TryHold(ctx, "a", 1)
	if err != nil {
		t.Fatalf(`TryHold(ctx, "a", 1) after its release = %v, want nil`, err)
	}
	a.Release()
}
