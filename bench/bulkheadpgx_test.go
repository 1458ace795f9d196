package bench

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/floodgate-go/floodgate/semaphore"
)

// BenchmarkPgx runs SELECT 1 (QueryRow + Scan) on a bare pgxpool.Pool, through
// an unlimited bulkheadpgx class and through a class capped by a local
// semaphore (never full), on one pool.
//
//	DATABASE_URL=postgres://... go test -run='^$' -bench=Pgx -benchmem -count=5
func BenchmarkPgx(b *testing.B) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		servertest.Missing(b, "DATABASE_URL is not set") // a failure under CI=true, a skip by hand
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		servertest.Missing(b, "PostgreSQL at DATABASE_URL unreachable: "+err.Error())
	}
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "capped", Gate: semaphore.New(16, semaphore.Config{})},
	}})
	impls := []struct {
		name string
		run  func() error
	}{
		{"bare", func() error { var v int; return pool.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{"unlimited", func() error { var v int; return db.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{"localcap", func() error { var v int; return db.Class("capped").QueryRow(ctx, "SELECT 1").Scan(&v) }},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := impl.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
