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

// TestHoldReleaseTwice: release frees the weight once, ends the work
// context with ErrReleased, and a second call frees nothing more.
func TestHoldReleaseTwice(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{})
	ctx := t.Context()
	wctx, release, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatalf("Hold(ctx, 1) = %v, want nil", err)
	}
	if wctx.Err() != nil {
		t.Fatalf("work context done while the permit is held: %v", context.Cause(wctx))
	}
	other, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	release()
	release()
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
	wctx, release, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
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
	release()
	release()
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
	wctx, release, err := s.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-wctx.Done()
	if cause := context.Cause(wctx); cause != context.Canceled {
		t.Errorf("work context cause = %v, want context.Canceled", cause)
	}
	if st := stats(t, s); st.InUse != 1 {
		t.Fatalf("InUse before release = %d, want 1", st.InUse)
	}
	release()
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 {
		t.Fatalf("after release with a done context: %+v, want nothing held", st)
	}
}

// TestHoldErrors: on error nothing is held and release is nil.
func TestHoldErrors(t *testing.T) {
	db := redistest.Connect(t)
	s := newSem(t, db.Client, db.Prefix+"sem", 2, distsem.Config{})
	if got := s.Limit(); got != 2 {
		t.Errorf("Limit() = %d, want 2", got)
	}
	ctx := t.Context()
	if wctx, release, err := s.Hold(ctx, 3); !errors.Is(err, distsem.ErrTooLarge) || wctx != nil || release != nil {
		t.Errorf("Hold(ctx, 3) of 2 = (%v, %v, %v), want (nil, nil, ErrTooLarge)", wctx, release != nil, err)
	}
	_, release, err := s.Hold(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if wctx, rel, err := s.Hold(dctx, 1); err != context.DeadlineExceeded || wctx != nil || rel != nil {
		t.Errorf("Hold on a full semaphore until the deadline = (%v, %v, %v), want (nil, nil, DeadlineExceeded)", wctx, rel != nil, err)
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
	wctx, release, err := s.TryHold(ctx, 1)
	if err != nil {
		t.Fatalf("TryHold(ctx, 1) on a free semaphore = %v, want nil", err)
	}
	start := time.Now()
	if w, rel, err := s.TryHold(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) || w != nil || rel != nil {
		t.Errorf("TryHold(ctx, 1) on a full semaphore = (%v, %v, %v), want (nil, nil, ErrNoCapacity)", w, rel != nil, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("TryHold on a full semaphore took %v, want one round trip", d)
	}
	release()
	release()
	if cause := context.Cause(wctx); !errors.Is(cause, distsem.ErrReleased) {
		t.Errorf("work context cause after release = %v, want ErrReleased", cause)
	}
	if st := stats(t, s); st.InUse != 0 || st.Holders != 0 || st.Waiting != 0 {
		t.Errorf("after release: %+v, want nothing held or waiting", st)
	}
}
