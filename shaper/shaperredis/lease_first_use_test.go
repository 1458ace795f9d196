package shaperredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestLeaseFreshFetchesOnFirstUse: a fresh Lease under ExhaustReject admits its
// first call (waiting for the first refill within the caller's deadline)
// instead of refusing until the first refill lands.
func TestLeaseFreshFetchesOnFirstUse(t *testing.T) {
	db := redistest.Connect(t)
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(100), Burst: 50}, shaperredis.Config{Prefix: db.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := m.Lease("w", shaperredis.LeaseConfig{Batch: 10})
	defer l.Close()
	if err := l.Wait(ctx, 1); err != nil {
		t.Fatalf("first Wait on a fresh Lease: %v (stats %+v)", err, l.Stats())
	}
	l2 := m.Lease("a", shaperredis.LeaseConfig{Batch: 10})
	defer l2.Close()
	if d, err := l2.Admit(ctx, "ignored", 1); err != nil || !d.Allowed {
		t.Fatalf("first Admit on a fresh Lease: %+v, %v", d, err)
	}
	// Once the first refill has landed, an empty Lease refuses at once again.
	l3 := m.Lease("empty", shaperredis.LeaseConfig{Batch: 1, LowWater: 0})
	defer l3.Close()
	if err := l3.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := l3.Wait(ctx, 1); err != nil {
			if !errors.Is(err, shaperredis.ErrLimited) {
				t.Fatalf("Wait on an exhausted Lease: %v, want ErrLimited", err)
			}
			return
		}
	}
	t.Error("a Lease of Batch 1 on 100/s admitted 101 calls at once")
}
