package floodgatetest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/redis/go-redis/v9"
)

func TestStartRedisKillRestart(t *testing.T) {
	s := floodgatetest.StartRedis(t)
	rdb := s.Client()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := rdb.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Errorf("CONFIG GET save = %v, %v; want no persistence", got, err)
	}
	s.Kill()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a killed server succeeded")
	}
	addr := s.Addr
	s.Restart()
	if s.Addr != addr {
		t.Errorf("Addr after Restart = %s, want %s", s.Addr, addr)
	}
	if _, err := rdb.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after Restart = %v, want redis.Nil (an empty server)", err)
	}
}

// TestRedisAddrStartsAServer: without REDIS_ADDR, RedisAddr starts a private
// server.
func TestRedisAddrStartsAServer(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	addr := floodgatetest.RedisAddr(t)
	rdb := redis.NewClient(floodgatetest.RedisOptions(addr))
	defer rdb.Close()
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING %s: %v", addr, err)
	}
}

func TestKeyPrefixAndDeletePrefix(t *testing.T) {
	rdb := redis.NewClient(floodgatetest.RedisOptions(floodgatetest.RedisAddr(t)))
	defer rdb.Close()
	ctx := t.Context()
	a, b := floodgatetest.KeyPrefix(t), floodgatetest.KeyPrefix(t)
	if a == b {
		t.Fatalf("KeyPrefix twice = %q: not unique", a)
	}
	if strings.ContainsAny(a, "[]*?\\{}") {
		t.Fatalf("KeyPrefix = %q: has glob or brace characters", a)
	}
	for _, k := range []string{a + "x", "{" + a + "tagged}:y", b + "keep"} {
		if err := rdb.Set(ctx, k, 1, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	defer rdb.Del(ctx, b+"keep")
	if err := floodgatetest.DeletePrefix(ctx, rdb, a); err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	if n, err := rdb.Exists(ctx, a+"x", "{"+a+"tagged}:y").Result(); err != nil || n != 0 {
		t.Errorf("after DeletePrefix, EXISTS = %d, %v; want 0", n, err)
	}
	if n, err := rdb.Exists(ctx, b+"keep").Result(); err != nil || n != 1 {
		t.Errorf("another prefix's key: EXISTS = %d, %v; want 1", n, err)
	}
}
