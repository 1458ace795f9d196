// Package redistest connects floodgate's own tests to a real redis-server. It
// is a thin layer over floodgatetest, the kit users test their configurations
// with (so the kit runs in every floodgate test that needs Redis), plus what
// only floodgate's tests need: SIGSTOP pauses, clusters, round-trip counting.
//
// [Connect] uses the server at REDIS_ADDR (started by `make test`) and gives each
// test a unique key prefix, deleting only keys under that prefix when the test ends;
// it never flushes a database, so tests may run in parallel. [Start] runs a private
// redis-server child on a free loopback port for tests that must kill, pause or
// restart it. Without a server, tests skip when run by hand and fail under CI=true
// (see internal/servertest).
package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/redis/go-redis/v9"
)

// DB is a connection to the shared test Redis with a key prefix of its own.
type DB struct {
	// Client has ContextTimeoutEnabled set, so a context deadline bounds every call.
	Client *redis.Client
	// Prefix is unique to this test. It contains no glob or hash-tag characters, so
	// "{" + Prefix + "name}" is a valid hash-tagged key.
	Prefix string
}

// Key returns Prefix + name.
func (db *DB) Key(name string) string { return db.Prefix + name }

// Options returns the client options every test client uses for addr: context
// deadlines are honoured and the handshake sends nothing optional
// (floodgatetest.RedisOptions).
func Options(addr string) *redis.Options { return floodgatetest.RedisOptions(addr) }

// Connect returns a client for the Redis at REDIS_ADDR and a fresh key prefix. It
// pings the server, and at the end of the test deletes every key under the prefix
// and closes the client.
func Connect(t testing.TB) *DB {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		servertest.Missing(t, "REDIS_ADDR is not set")
	}
	rdb := redis.NewClient(Options(addr))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		servertest.Missing(t, "redis at REDIS_ADDR="+addr+" unreachable: "+err.Error())
	}
	db := &DB{Client: rdb, Prefix: Prefix(t)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := DeletePrefix(ctx, rdb, db.Prefix); err != nil {
			t.Errorf("redistest: cleanup of %q: %v", db.Prefix, err)
		}
		rdb.Close()
	})
	return db
}

// Prefix returns a key prefix unique to this test run: the sanitised test name, a
// random suffix and a colon (floodgatetest.KeyPrefix). It holds no glob
// characters ([]*?\) and no braces.
func Prefix(t testing.TB) string { return floodgatetest.KeyPrefix(t) }

// DeletePrefix deletes every key that starts with prefix, with SCAN and UNLINK,
// and returns the first error (floodgatetest.DeletePrefix). Braces in keys
// (hash tags) are matched too: keys of the form "{" + prefix + "...}" are
// deleted as well.
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	return floodgatetest.DeletePrefix(ctx, rdb, prefix)
}
