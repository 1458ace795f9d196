//go:build !race

package bulkheadpgx_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/semaphore"
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

// TestLocalCapAllocs checks what a class capped by a local semaphore (with
// room) adds to the pool's own call: the one value that holds the permit
// until the work ends (the Row, the Rows, the Exec's hold), and nothing for
// the gate itself (semaphore.Weighted's Hold does not allocate, gatewait
// adds nothing, the work's closure stays on the stack).
func TestLocalCapAllocs(t *testing.T) {
	pool := pgtest.Pool(t, 2)
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "capped", Gate: semaphore.New(16, semaphore.Config{})},
		{Name: "never", Gate: semaphore.New(16, semaphore.Config{}), MaxWait: -1},
	}})
	ctx := context.Background()
	var v int
	bare := testing.AllocsPerRun(200, func() { pool.QueryRow(ctx, "SELECT 1").Scan(&v) })
	for _, name := range []string{"capped", "never"} {
		c := db.Class(name)
		if got := testing.AllocsPerRun(200, func() { c.QueryRow(ctx, "SELECT 1").Scan(&v) }); got > bare+1 {
			t.Errorf("QueryRow through class %s: %v allocs, bare pool %v; want at most one more", name, got, bare)
		}
	}
	bare = testing.AllocsPerRun(200, func() {
		rows, _ := pool.Query(ctx, "SELECT 1")
		for rows.Next() {
		}
		rows.Close()
	})
	c := db.Class("capped")
	if got := testing.AllocsPerRun(200, func() {
		rows, _ := c.Query(ctx, "SELECT 1")
		for rows.Next() {
		}
		rows.Close()
	}); got > bare+1 {
		t.Errorf("Query through a capped class: %v allocs, bare pool %v; want at most one more", got, bare)
	}
	bare = testing.AllocsPerRun(200, func() { pool.Exec(ctx, "SELECT 1") })
	if got := testing.AllocsPerRun(200, func() { c.Exec(ctx, "SELECT 1") }); got > bare+1 {
		t.Errorf("Exec through a capped class: %v allocs, bare pool %v; want at most one more", got, bare)
	}
}
