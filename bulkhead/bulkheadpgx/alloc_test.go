//go:build !race

package bulkheadpgx_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
)

// TestUnlimitedAllocs checks that an unlimited class adds no allocation to
// the pool's own call.
func TestUnlimitedAllocs(t *testing.T) {
	pool := pgtest.Pool(t, 2)
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{})
	ctx := context.Background()
	var v int
	bare := testing.AllocsPerRun(200, func() { pool.QueryRow(ctx, "SELECT 1").Scan(&v) })
	wrapped := testing.AllocsPerRun(200, func() { db.QueryRow(ctx, "SELECT 1").Scan(&v) })
	if wrapped > bare {
		t.Errorf("QueryRow through an unlimited class: %v allocs, bare pool %v; want no more", wrapped, bare)
	}
	bare = testing.AllocsPerRun(200, func() { pool.Exec(ctx, "SELECT 1") })
	wrapped = testing.AllocsPerRun(200, func() { db.Exec(ctx, "SELECT 1") })
	if wrapped > bare {
		t.Errorf("Exec through an unlimited class: %v allocs, bare pool %v; want no more", wrapped, bare)
	}
}
