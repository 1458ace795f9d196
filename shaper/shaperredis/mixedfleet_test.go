package shaperredis_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// A rolling deploy runs processes of the previous version (whose scripts are
// kept in testdata: v1_common.lua, their prelude, and v1_<algorithm>.lua;
// ARGV P, C, B, n, deadline as decimal text, the
// token bucket's and the windows' state as decimal text) beside new ones on
// the same Redis, Prefix and keys. These tests hold a mixed fleet to: no key
// corrupted or reset by either version. (The v1 files are the meters' scripts
// before their states were packed; the Queue's scripts of commit 097c787,
// the last to write its schedule as text, are kept as v2_*.lua, for
// TestMixedFleetSharesQueueSchedule in mixedfleet_internal_test.go.)

// v1 returns the previous version's meter script of algo, and a call of it:
// cost n on the Redis key key under a limit of count per period with burst.
func v1(t *testing.T, db *redistest.DB, algo string, period time.Duration, count, burst int64) func(key string, n int64) []int64 {
	// As the scripts are assembled: the shared prelude, then the algorithm.
	var src []byte
	for _, part := range []string{"common", algo} {
		b, err := os.ReadFile("testdata/v1_" + part + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	sc := redis.NewScript(string(src))
	p := strconv.FormatInt(period.Microseconds(), 10)
	return func(key string, n int64) []int64 {
		v, err := sc.Run(context.Background(), db.Client, []string{key}, p, count, burst, n, 0).Int64Slice()
		if err != nil {
			t.Fatalf("v1 %s: %v", algo, err)
		}
		return v
	}
}

func fleetBreaker(db *redistest.DB) *breaker.Breaker {
	return breaker.New(db.Key("brk"), breaker.Config{CallTimeout: 2 * time.Second})
}

// TestMixedFleetSharesGCRA: the GCRA state is the same packed state in both
// versions, under the same key, so old and new processes share one quota: a
// burst of 4 at 1/min, spent in turns by an old and a new process, admits 4
// in all and then refuses both.
func TestMixedFleetSharesGCRA(t *testing.T) {
	db := redistest.Connect(t)
	ctx := t.Context()
	lim := shaper.Limit{Rate: shaper.PerMinute(1), Burst: 4}
	m := shaperredis.NewMeter(db.Client, lim, shaperredis.Config{Prefix: db.Key("g:"), Breaker: fleetBreaker(db)})
	old := v1(t, db, "gcra", time.Minute, 1, 4)
	if key, v1key := m.Key("k"), db.Key("g:")+"{k}"; key != v1key {
		t.Fatalf("GCRA key %q, the previous version's %q", key, v1key)
	}
	for i := range 6 {
		var allowed bool
		if i%2 == 0 {
			allowed = old(m.Key("k"), 1)[0] == 1
		} else {
			d, err := m.AllowN(ctx, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			allowed = d.Allowed
		}
		if want := i < 4; allowed != want {
			t.Errorf("call %d (old version: %v): allowed %v, want %v", i, i%2 == 0, allowed, want)
		}
	}
}

// TestMixedFleetKeepsTextStates: the token bucket and the windows store
// their state packed under keys of their own (Meter.Key ends in ":p"), so
// that neither version reads the other's state: each keeps its own quota
// through the deploy, and neither's state is reset or corrupted by the
// other's writes. (The fleet may admit up to a quota per version until the
// last old process stops; the old keys then expire with their TTL.)
func TestMixedFleetKeepsTextStates(t *testing.T) {
	db := redistest.Connect(t)
	ctx := t.Context()
	lim := shaper.Limit{Rate: shaper.PerMinute(3)}
	for _, tc := range []struct {
		algo string
		new  func(redis.UniversalClient, shaper.Limit, shaperredis.Config) *shaperredis.Meter
	}{
		{"tokenbucket", shaperredis.NewTokenBucket},
		{"fixedwindow", shaperredis.NewFixedWindow},
		{"slidinglog", shaperredis.NewSlidingLog},
		{"slidingcounter", shaperredis.NewSlidingCounter},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			prefix := db.Key(tc.algo + ":")
			m := tc.new(db.Client, lim, shaperredis.Config{Prefix: prefix, Breaker: fleetBreaker(db)})
			old, v1key := v1(t, db, tc.algo, time.Minute, 3, 3), prefix+"{k}"
			if m.Key("k") == v1key {
				t.Fatalf("Key(k) = %q, the previous version's key", v1key)
			}
			// Turns: old, new, old, new...: each version admits its own 3.
			for i := range 8 {
				var allowed bool
				if i%2 == 0 {
					allowed = old(v1key, 1)[0] == 1
				} else {
					d, err := m.AllowN(ctx, "k", 1)
					if err != nil {
						t.Fatal(err)
					}
					allowed = d.Allowed
				}
				if want := i < 6; allowed != want {
					t.Errorf("call %d (old version: %v): allowed %v, want %v", i, i%2 == 0, allowed, want)
				}
			}
			// The old state is still the old version's text, and the new one
			// the new version's: neither took the other's for a fresh key.
			if typ := db.Client.Type(ctx, v1key).Val(); typ == "string" {
				if v := db.Client.Get(ctx, v1key).Val(); len(v) == 0 || v[0] < '0' || v[0] > '9' {
					t.Errorf("old key holds %q, not the old text state", v)
				}
			} else if typ != "list" {
				t.Errorf("old key is a %s", typ)
			}
			if n := db.Client.Exists(ctx, m.Key("k")).Val(); n != 1 {
				t.Errorf("new key %q missing", m.Key("k"))
			}
		})
	}
}
