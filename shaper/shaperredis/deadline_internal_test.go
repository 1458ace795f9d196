package shaperredis

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
)

// TestScriptsSpendNothingPastDeadline: every script that spends on a caller's
// behalf (the meters, single and batched; lease; reserve) replies -2 with
// Redis's time and writes nothing when its deadline argument has passed, and
// decides as usual with a deadline to come or none (0).
func TestScriptsSpendNothingPastDeadline(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Second).UnixMicro()
	future := time.Now().Add(time.Hour).UnixMicro()
	rl := newRedisLimit("t", shaper.Limit{Rate: shaper.PerSecond(10)}, false)
	redisNow := func(t *testing.T) int64 {
		tm, err := db.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMicro()
	}
	exists := func(t *testing.T, key string) bool {
		n, err := db.Client.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for kind := range kindNames {
		single, multi := scripts.meter[kind], scripts.batch[kind]
		t.Run(kindNames[kind], func(t *testing.T) {
			key := db.Prefix + kindNames[kind] + "{past}"
			before := redisNow(t)
			v, err := single.EvalInts(ctx, db.Client, new(evalBuf).fill(key, rl, 1, past))
			if err != nil {
				t.Fatal(err)
			}
			if len(v) != 4 || v[0] != expiredReply || v[1] < before || v[2] != 0 || v[3] != 0 {
				t.Errorf("past deadline: reply %v, want [-2 now 0 0]", v)
			}
			if exists(t, key) {
				t.Errorf("past deadline: %s written", key)
			}
			for i, dl := range []int64{0, future} {
				v, err := single.EvalInts(ctx, db.Client, new(evalBuf).fill(key, rl, 1, dl))
				if want := int64(9 - i); err != nil || len(v) != 4 || v[0] != 1 || v[1] != want {
					t.Errorf("deadline %d: reply %v, %v, want allowed with %d remaining", dl, v, err, want)
				}
			}
			if err := single.Run(ctx, db.Client, []string{key}, rl.arg, 1, 0).Err(); err == nil {
				t.Errorf("the deadline as an argument of its own (not in the head) accepted")
			}

			// A batch of three calls of one key: the second is past its
			// deadline and skipped, the others decide in order.
			bkey := db.Prefix + kindNames[kind] + "{batch}"
			b := &batcher{client: db.Client, max: 8, single: single, multi: multi}
			batch := []*bcall{
				{args: new(evalBuf).fill(bkey, rl, 2, future)},
				{args: new(evalBuf).fill(bkey, rl, 3, past)},
				{args: new(evalBuf).fill(bkey, rl, 4, 0)},
			}
			if !b.execMulti(ctx, batch) {
				t.Fatal("batch not sent as one call")
			}
			for i, want := range []struct{ first, rem int64 }{{1, 8}, {expiredReply, -1}, {1, 4}} {
				c := batch[i]
				if c.err != nil || len(c.v) != 4 || c.v[0] != want.first || want.rem >= 0 && c.v[1] != want.rem {
					t.Errorf("batch call %d: %v, %v, want first %d, remaining %d", i, c.v, c.err, want.first, want.rem)
				}
			}
		})
	}
	t.Run("lease", func(t *testing.T) {
		key := db.Prefix + "lease{k}"
		var out [4]int64
		if err := evalKey(ctx, db.Client, leaseScript, key, out[:], rl.arg, 5, 0, 1, past); err != nil {
			t.Fatal(err)
		}
		if out[0] != expiredReply || exists(t, key) {
			t.Errorf("past deadline: reply %v, key written %v", out, exists(t, key))
		}
		if err := evalKey(ctx, db.Client, leaseScript, key, out[:], rl.arg, 5, 0, 1, future); err != nil || out[0] != 5 {
			t.Errorf("deadline to come: reply %v, %v, want 5 taken", out, err)
		}
	})
	t.Run("reserve", func(t *testing.T) {
		key := db.Prefix + "reserve{k}"
		var out [7]int64
		if err := evalKey(ctx, db.Client, reserveScript, key, out[:], rl.arg, 1, 0, past); err != nil {
			t.Fatal(err)
		}
		if out[0] != expiredReply || exists(t, key) {
			t.Errorf("past deadline: reply %v, key written %v", out, exists(t, key))
		}
		if err := evalKey(ctx, db.Client, reserveScript, key, out[:], rl.arg, 1, 0, future); err != nil || out[0] != 1 {
			t.Errorf("deadline to come: reply %v, %v, want taken", out, err)
		}
	})
}
