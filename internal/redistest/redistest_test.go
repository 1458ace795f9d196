package redistest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestConnectReachesServerAndCleansOnlyItsPrefix(t *testing.T) {
	outer := redistest.Connect(t)
	ctx := t.Context()
	keep := outer.Key("keep")
	if err := outer.Client.Set(ctx, keep, "1", time.Minute).Err(); err != nil {
		t.Fatalf("SET %s: %v", keep, err)
	}
	var innerKeys []string
	t.Run("inner", func(t *testing.T) {
		inner := redistest.Connect(t)
		if inner.Prefix == outer.Prefix {
			t.Fatalf("prefixes not unique: %q", inner.Prefix)
		}
		if strings.ContainsAny(inner.Prefix, "[]*?\\{}") {
			t.Fatalf("prefix %q has glob or brace characters", inner.Prefix)
		}
		innerKeys = []string{inner.Key("a"), "{" + inner.Prefix + "tagged}:b"}
		for _, k := range innerKeys {
			if err := inner.Client.Set(ctx, k, "1", time.Minute).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
		}
	})
	n, err := outer.Client.Exists(ctx, innerKeys...).Result()
	if err != nil || n != 0 {
		t.Fatalf("after the inner test, EXISTS %v = %d, %v; want 0 (cleanup)", innerKeys, n, err)
	}
	if got, err := outer.Client.Get(ctx, keep).Result(); err != nil || got != "1" {
		t.Fatalf("outer key %s = %q, %v after inner cleanup; want 1", keep, got, err)
	}
}

func TestServerPauseResumeKillRestart(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on child: %v", err)
	}

	s.Pause()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	start := time.Now()
	err := rdb.Ping(cctx).Err()
	cancel()
	if err == nil {
		t.Fatal("PING on a paused server succeeded")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("PING on a paused server took %v despite a 100ms deadline", el)
	}
	s.Resume()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}

	s.Kill()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a killed server succeeded")
	}
	s.Restart()
	if _, err := rdb.Get(ctx, "k").Result(); err == nil || !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after restart = %v, want redis.Nil (empty server)", err)
	}
}
