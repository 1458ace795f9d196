package bulkheadpgx_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
)

// The leaves are the gates a class takes, with no adapter.
var (
	_ floodgate.Gate      = (*semaphore.Weighted)(nil)
	_ floodgate.Gate      = (*adaptive.Gate)(nil)
	_ floodgate.Gate      = (*distsem.Semaphore)(nil)
	_ floodgate.KeyedGate = (*semaphore.Keyed)(nil)
	_ floodgate.KeyedGate = (*distsem.Keyed)(nil)
)

// marker returns a comment unique to this test, to find its queries in
// pg_stat_activity.
func marker(t *testing.T) string {
	var b [4]byte
	rand.Read(b[:])
	return "/*bhpgx_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "_" + hex.EncodeToString(b[:]) + "*/"
}

// adminConn is a connection outside every pool, for sampling and killing.
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sampler counts, every 10 ms until stopped, the active queries carrying
// mark, and records the largest count seen.
type sampler struct {
	stop    context.CancelFunc
	wg      sync.WaitGroup
	max     int
	samples int
	err     error
}

func sample(t *testing.T, mark string) *sampler {
	conn := adminConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{stop: cancel}
	s.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, mark).Scan(&n)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.err = err
				return
			}
			s.samples++
			s.max = max(s.max, n)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// done stops the sampler and returns the largest count it saw.
func (s *sampler) done(t *testing.T) int {
	t.Helper()
	s.stop()
	s.wg.Wait()
	if s.err != nil {
		t.Fatalf("sampler: %v", s.err)
	}
	if s.samples < 10 {
		t.Fatalf("sampler took %d samples, want at least 10", s.samples)
	}
	return s.max
}

// checkIdle fails unless every class of db holds and waits for nothing.
func checkIdle(t *testing.T, db *bulkheadpgx.DB) {
	t.Helper()
	for _, c := range db.Stats().Classes {
		if c.InUse != 0 || c.Waiting != 0 {
			t.Errorf("class %s: InUse %d, Waiting %d after the work ended, want 0, 0", c.Name, c.InUse, c.Waiting)
		}
	}
}
