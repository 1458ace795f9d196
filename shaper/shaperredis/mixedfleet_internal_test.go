package shaperredis

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
)

// The previous version's Queue scripts, of commit 097c787 (which wrote the
// schedule as text and read it packed too), are kept in testdata as
// v2_limithead.lua, v2_common.lua (their prelude), v2_helpers.lua,
// v2_reserve.lua and v2_unreserve.lua, and assembled here as scripts.go
// assembles reserve and unreserve, with the tests' pinned clock
// (pinnedClock). See mixedfleet_test.go for the meters' mixed fleet.

// v2Queue returns the previous version's reserve and unreserve scripts.
func v2Queue(t *testing.T) (reserve, unreserve *redisscript.Script) {
	read := func(part string) string {
		b, err := os.ReadFile("testdata/v2_" + part + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	args, names, ok := strings.Cut(read("common"), "-- clock\n")
	if !ok {
		t.Fatal("v2_common.lua has no clock line")
	}
	script := func(nargs, body string) *redisscript.Script {
		return redisscript.New(read("limithead") + args + pinnedClock(nargs) + names + read("helpers") + read(body))
	}
	return script("4", "reserve"), script("6", "unreserve")
}

// TestMixedFleetSharesQueueSchedule: during a rolling deploy from the
// previous version (which writes the schedule as text) processes of both
// versions reserve and give back on one schedule. One sequence of
// reservations and give-backs at pinned times runs on two queues: on one,
// the calls alternate between the previous version's scripts and these, on
// the other all are these. Both must answer the same (one shared schedule,
// never reset by either version), and the mixed queue's schedule must have
// been written in both formats and read by each version after the other's
// write.
func TestMixedFleetSharesQueueSchedule(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	oldReserve, oldUnreserve := v2Queue(t)
	if oldReserve.Hash() == testScripts.reserve.Hash() || oldUnreserve.Hash() == testScripts.unreserve.Hash() {
		t.Fatal("the previous version's scripts are these: nothing to compare")
	}
	const maxwait = 500_000
	mk := func(name string) *Queue {
		return NewQueue(db.Client, name, shaper.PerSecond(10), QueueConfig{Burst: 3, MaxWait: maxwait * time.Microsecond}, Config{Prefix: db.Prefix})
	}
	mixed, current := mk("mixed"), mk("current")
	var now int64 = 1_700_000_000_000_000
	// call i on the mixed queue is made by the previous version if i is even.
	calls := 0
	pick := func(q *Queue, cur, old *redisscript.Script) (*redisscript.Script, bool) {
		if q != mixed {
			return cur, false
		}
		calls++
		if calls%2 == 1 {
			return old, true
		}
		return cur, false
	}
	// get is q's schedule and its format: "text", "packed", or "" if none.
	get := func(q *Queue) (v, format string) {
		v, err := db.Client.Get(ctx, q.Key()).Result()
		switch {
		case err != nil:
			return "", ""
		case len(v) == 16:
			return v, "packed"
		case strings.Count(v, " ") == 1 && strings.Trim(v, "0123456789 ") == "":
			return v, "text"
		}
		t.Fatalf("schedule %q is neither text nor packed", v)
		return "", ""
	}
	// On the mixed queue, each version writes its own format (the previous
	// text, these packed); crossed counts the calls that found a busy
	// schedule last written by the other version, wrote the writes by format.
	crossed, lastOld := 0, false
	wrote := map[string]int{}
	track := func(q *Queue, old, busy bool, before string) {
		if q != mixed {
			return
		}
		if busy && before != "" && lastOld != old {
			crossed++
		}
		after, f := get(q)
		if after == before || f == "" {
			return
		}
		if want := map[bool]string{true: "text", false: "packed"}[old]; f != want {
			t.Fatalf("the %s scripts wrote the schedule %s (%q), want %s", map[bool]string{true: "previous", false: "current"}[old], f, after, want)
		}
		wrote[f]++
		lastOld = old
	}
	reserve := func(q *Queue, n int64) [7]int64 {
		sc, old := pick(q, testScripts.reserve, oldReserve)
		before, _ := get(q)
		var out [7]int64
		if err := evalKey(ctx, db.Client, sc, q.Key(), out[:], q.rl.arg, n, maxwait, 0, now); err != nil {
			t.Fatal(err)
		}
		track(q, old, out[5] >= 0, before)
		return out
	}
	unreserve := func(q *Queue, r [7]int64) int64 {
		sc, old := pick(q, testScripts.unreserve, oldUnreserve)
		before, _ := get(q)
		v, err := sc.Run(ctx, db.Client, []string{q.Key()}, q.rl.arg, 0, r[3], r[4], r[5], r[6], now).Int64()
		if err != nil {
			t.Fatal(err)
		}
		track(q, old, v == 1, before)
		return v
	}
	// A deterministic sequence: steps of 0 to 120ms (now and then an idle
	// second), costs 1 to 3, and a give-back of one of the last three
	// reservations in about one step of four.
	rnd := uint64(7)
	next := func(n uint64) int64 {
		rnd = rnd*6364136223846793005 + 1442695040888963407
		return int64((rnd >> 33) % n)
	}
	var taken [][7]int64
	gaveBack, refused := 0, 0
	for step := range 300 {
		switch next(20) {
		case 0:
			now += 1_000_000
		default:
			now += []int64{0, 0, 20_000, 50_000, 120_000}[next(5)]
		}
		if len(taken) > 0 && next(4) == 0 {
			r := taken[max(0, len(taken)-1-int(next(3)))]
			a, b := unreserve(mixed, r), unreserve(current, r)
			if a != b {
				t.Fatalf("step %d: give-back of %v = %d with both versions, %d with these scripts only", step, r, a, b)
			}
			gaveBack += int(a)
			continue
		}
		n := 1 + next(3)
		a, b := reserve(mixed, n), reserve(current, n)
		if a != b {
			t.Fatalf("step %d: reserve(%d) = %v with both versions, %v with these scripts only", step, n, a, b)
		}
		if a[0] == 1 {
			taken = append(taken, a)
		} else {
			refused++
		}
	}
	t.Logf("%d reserved, %d refused, %d given back; %d calls read the other version's busy schedule; writes %v", len(taken), refused, gaveBack, crossed, wrote)
	if len(taken) < 50 || refused < 10 || gaveBack < 10 || crossed < 50 || wrote["text"] < 20 || wrote["packed"] < 20 {
		t.Fatal("the sequence did not exercise both versions' reads and writes of a busy schedule, refusals and give-backs")
	}
}
