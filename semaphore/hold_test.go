package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

func TestHoldReleaseTwiceReleasesOnce(t *testing.T) {
	s := semaphore.New(3, semaphore.Config{})
	ctx := t.Context()
	wctx, release, err := s.Hold(ctx, 2)
	if err != nil {
		t.Fatalf("Hold(ctx, 2) = %v, want nil", err)
	}
	if wctx != ctx {
		t.Errorf("Hold returned context %v, want the caller's", wctx)
	}
	if !s.TryAcquire(1) { // another holder's weight
		t.Fatal("TryAcquire(1) with 2 of 3 held = false")
	}
	release()
	release() // must not release the other holder's weight
	if st := s.Stats(); st.InUse != 1 {
		t.Fatalf("InUse after release twice = %d, want 1 (the other holder's)", st.InUse)
	}
	s.Release(1)
	if st := s.Stats(); st.InUse != 0 {
		t.Fatalf("InUse after all released = %d, want 0", st.InUse)
	}
}

func TestHoldWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		_, first, err := s.Hold(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var second func()
		done := make(chan error, 1)
		go func() {
			var err error
			_, second, err = s.Hold(t.Context(), 1)
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("second Hold returned %v while the first held the weight", err)
		default:
		}
		first()
		if err := <-done; err != nil {
			t.Fatalf("second Hold after the first released = %v, want nil", err)
		}
		second()
		second()
		if st := s.Stats(); st.InUse != 0 || st.Acquired != 2 {
			t.Fatalf("Stats = %+v, want InUse 0, Acquired 2", st)
		}
	})
}

func TestHoldErrorsHoldNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{MaxWait: time.Second})
		cctx, cancel := context.WithCancel(t.Context())
		cancel()
		tests := []struct {
			name string
			ctx  context.Context
			n    int64
			want error
		}{
			{"done context", cctx, 1, context.Canceled},
			{"too large", t.Context(), 3, semaphore.ErrTooLarge},
		}
		for _, tt := range tests {
			wctx, release, err := s.Hold(tt.ctx, tt.n)
			if !errors.Is(err, tt.want) || wctx != nil || release != nil {
				t.Errorf("%s: Hold = (%v, %v, %v), want (nil, nil, %v)", tt.name, wctx, release != nil, err, tt.want)
			}
		}
		_, release, err := s.Hold(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, rel, err := s.Hold(t.Context(), 1); !errors.Is(err, semaphore.ErrMaxWait) || rel != nil {
			t.Errorf("Hold on a full semaphore = (%v, %v), want (nil, ErrMaxWait)", rel != nil, err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Hold waited %v, want MaxWait (1s)", d)
		}
		release()
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Errorf("Stats = %+v, want nothing held or waiting", st)
		}
	})
}

func TestLimit(t *testing.T) {
	var zero semaphore.Weighted
	if got := zero.Limit(); got != 0 {
		t.Errorf("zero Weighted: Limit() = %d, want 0", got)
	}
	s := semaphore.New(5, semaphore.Config{})
	if got := s.Limit(); got != 5 {
		t.Errorf("Limit() = %d, want 5", got)
	}
	s.SetLimit(2)
	if got := s.Limit(); got != 2 {
		t.Errorf("Limit() after SetLimit(2) = %d, want 2", got)
	}
}
