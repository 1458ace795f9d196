//go:build !race

// The race detector allocates on its own; allocation budgets are checked
// without it (as x/time does).

package redisscript_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestEvalIntsAddsNoAllocation: a cached call allocates what go-redis
// allocates for the same EVALSHA built by hand, and nothing more.
func TestEvalIntsAddsNoAllocation(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	s := redisscript.New(echo)
	a := args(db.Prefix+"{k}", "1", "2")
	if _, err := s.EvalInts(ctx, db.Client, a); err != nil {
		t.Fatal(err)
	}
	bare := testing.AllocsPerRun(200, func() {
		cmd := redis.NewIntSliceCmd(ctx, a...)
		_ = db.Client.Process(ctx, cmd)
		if _, err := cmd.Result(); err != nil {
			t.Fatal(err)
		}
	})
	got := testing.AllocsPerRun(200, func() {
		if _, err := s.EvalInts(ctx, db.Client, a); err != nil {
			t.Fatal(err)
		}
	})
	if got > bare {
		t.Errorf("EvalInts allocates %v times per call, a bare IntSliceCmd %v", got, bare)
	}
	t.Logf("EvalInts: %v allocs per call (bare IntSliceCmd: %v)", got, bare)
}
