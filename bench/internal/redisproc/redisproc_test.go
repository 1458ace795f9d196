package redisproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/floodgate-go/floodgate/floodgatetest"
)

// TestRestartEmpty: a started server answers, a killed one does not, and a
// restarted one answers on the same address with no data.
func TestRestartEmpty(t *testing.T) {
	bin := redisproc.Binary()
	if bin == "" {
		floodgatetest.Missing(t, "no redis-server: set REDIS_SERVER")
	}
	ctx := t.Context()
	s, err := redisproc.Start(ctx, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	rdb := s.Admin()
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on a started server: %v", err)
	}
	s.Kill()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err == nil {
		t.Fatalf("PING after Kill succeeded")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after Restart = %d, %v; want 0, nil (restarted empty)", n, err)
	}
}
