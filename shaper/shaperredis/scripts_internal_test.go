package shaperredis

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/floodgate-go/floodgate/shaper"

	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/internal/shapertest"
)

// The tests in this file call the scripts at chosen times (allowAt, leaseAt,
// fillAt: the scripts' test-time argument instead of Redis TIME), so that the
// Redis and the in-process implementation of each algorithm can be fed the
// same times.

var kindNames = [...]string{"gcra", "tokenbucket", "fixedwindow", "slidinglog", "slidingcounter"}

// TestRedisDifferential replays random (time, cost) sequences, with occasional
// limit changes, against each algorithm's in-process meter and its Redis script,
// and requires identical decisions (allowed, remaining, retry-after, reset-after).
func TestRedisDifferential(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	seqs, steps := 12, 250
	if s := os.Getenv("SHAPER_DIFF_SEQS"); s != "" {
		seqs, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		seqs = 3
	}
	for kind := range kinds {
		t.Run("algo="+kindNames[kind], func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("SHAPER_DIFF_SEED"); s != "" {
				seed, _ = strconv.ParseUint(s, 10, 64)
			}
			r := rand.New(rand.NewPCG(seed, uint64(kind)))
			t.Logf("seed %d", seed)
			var allowed, denied int
			for s := range seqs {
				lim := shapertest.RandomLimit(r, algoOf[kind])
				local := newLocal(algoKind(kind), lim)
				var now int64 = 1_700_000_000_000_000 + r.Int64N(1e12)
				rm := newMeter(algoKind(kind), db.Client, lim, Config{Prefix: db.Prefix + kindNames[kind] + ":", Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
				key := fmt.Sprintf("k%d", s)
				max := burstOf(lim)
				var hist []string
				for i := range steps {
					if r.IntN(25) == 0 { // change the limit on both sides
						lim = shapertest.RandomLimit(r, algoOf[kind])
						max = burstOf(lim)
						rm.SetLimit(lim)
						local.SetLimit(lim)
					}
					var n int64
					now, n = shapertest.RandomStep(r, now, lim, max)
					if r.IntN(40) == 0 { // a step back of up to three periods
						now -= r.Int64N(3*int64(lim.Rate.Period/time.Microsecond) + 1)
					}
					hist = append(hist, fmt.Sprintf("t=%d n=%d", now, n))
					want, werr := localAt(local, key, now, n)
					got, gerr := allowAt(ctx, rm, key, now, n)
					if werr != nil || gerr != nil {
						t.Fatalf("seq %d step %d (%v, t=%d, n=%d): local err %v, redis err %v", s, i, lim, now, n, werr, gerr)
					}
					if got.Allowed {
						allowed++
					} else {
						denied++
					}
					if got != want {
						t.Fatalf("seq %d step %d (%v, t=%d, n=%d):\nredis %+v\nlocal %+v\nlast steps: %v", s, i, lim, now, n, got, want, hist[len(hist)-min(len(hist), 8):])
					}
				}
			}
			if allowed == 0 || denied == 0 {
				t.Errorf("%d allowed and %d denied: the sequences do not exercise both answers", allowed, denied)
			}
		})
	}
}

func localAt(m *shaper.Meter, key string, now, n int64) (shaper.Decision, error) {
	return m.AllowNAt(key, time.UnixMicro(now), n)
}

// TestScriptsLoad loads every embedded script into Redis, so a syntax error fails
// here, and checks that each script's SHA-1 is the one go-redis computed.
func TestScriptsLoad(t *testing.T) {
	db := redistest.Connect(t)
	for name, s := range scriptsByName(scripts) {
		got, err := s.Load(context.Background(), db.Client).Result()
		if err != nil {
			t.Errorf("SCRIPT LOAD %s: %v", name, err)
		} else if got != s.Hash() {
			t.Errorf("SCRIPT LOAD %s = %s, want %s", name, got, s.Hash())
		}
	}
}

// scriptsByName returns every script of set by a name.
func scriptsByName(set *scriptSet) map[string]*redisscript.Script {
	m := map[string]*redisscript.Script{"reserve": set.reserve, "unreserve": set.unreserve, "lease": set.lease}
	for kind, name := range kindNames {
		m[name], m["batch_"+name], m["refund_"+name] = set.meter[kind], set.batch[kind], set.refund[kind]
	}
	return m
}

// TestTestScriptsDifferOnlyInClock: the scripts the tests run at pinned
// times (testScripts) are the production scripts but for the clock piece,
// so what the pinned-time tests check is what production runs; and no
// production script reads a time from its arguments.
func TestTestScriptsDifferOnlyInClock(t *testing.T) {
	marked := scriptsByName(newScriptSet(func(nargs string) string { return "<clock " + nargs + ">" }))
	prod, test := scriptsByName(scripts), scriptsByName(testScripts)
	clock := regexp.MustCompile(`<clock ([^>]*)>`)
	for name, m := range marked {
		if n := len(clock.FindAllString(m.Source(), -1)); n != 1 {
			t.Errorf("%s: %d clock pieces, want 1", name, n)
		}
		if got := clock.ReplaceAllLiteralString(m.Source(), timeClock("")); got != prod[name].Source() {
			t.Errorf("%s: production script is not the assembly with Redis TIME", name)
		}
		if got := clock.ReplaceAllStringFunc(m.Source(), func(s string) string {
			return pinnedClock(clock.FindStringSubmatch(s)[1])
		}); got != test[name].Source() {
			t.Errorf("%s: test script is not the assembly with the pinned clock", name)
		}
		if src := prod[name].Source(); strings.Contains(src, "NARGS") || !strings.Contains(src, "redis.call('TIME')") {
			t.Errorf("%s: production script does not read Redis TIME only", name)
		}
	}
}

// TestScriptsRefuseInvalidArguments calls each script directly with arguments the
// Go side never sends: the script refuses them and writes nothing.
func TestScriptsRefuseInvalidArguments(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	key := db.Prefix + "{k}"
	pack := func(xs ...float64) string {
		var out []byte
		for _, x := range xs {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
		}
		return string(out)
	}
	limit := func(p, c, b float64) string { return pack(p, c, b) }
	// A meter script's head: the limit, n and the deadline (meterhead.lua).
	head := func(p, c, b, n, dl float64) string { return pack(p, c, b, n, dl) }
	bad := [][]any{
		{head(0, 1, 1, 1, 0)},             // P < 1
		{head(1000, 0, 1, 1, 0)},          // C < 1
		{head(1000, 1, 0, 0, 0)},          // B < 1
		{head(1000, 1, 2, 3, 0)},          // n > B
		{head(1000, 1, 2, -1, 0)},         // n < 0
		{head(1000.5, 1, 2, 1, 0)},        // not an integer
		{head(1000, 1, 2, 0.5, 0)},        // n not an integer
		{head(1000, 1, 2, math.NaN(), 0)}, // n not a number
		{head(1e6, 1, 1e13, 1, 0)},        // B·P > 2^53
		{head(math.NaN(), 1, 1, 1, 0)},    // not a number
		{head(1000, 1, 2, 1, -1)},         // deadline < 0
		{head(1000, 1, 2, 1, 1.5)},        // deadline not an integer
		{head(1000, 1, 2, 1, math.NaN())}, // deadline not a number
		{limit(1000, 1, 2), "1", "0"},     // another script's arguments
		{head(1000, 1, 2, 1, 0)[:39]},     // not a packed head
		{"1000 1 2 1 0"},                  // not a packed head
		{},                                // no arguments
	}
	for _, s := range scripts.meter {
		for _, args := range bad {
			err := s.Run(ctx, db.Client, []string{key}, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "shaper: invalid arguments") {
				t.Errorf("script with ARGV %q: err = %v, want invalid arguments", args, err)
			}
		}
	}
	if n := db.Client.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("refused calls wrote the key")
	}
	// The same head with every value in range is a decision: what the cases
	// above change is what each refuses.
	for i, s := range scripts.meter {
		k := fmt.Sprintf("%s{ok%d}", db.Prefix, i)
		if err := s.Run(ctx, db.Client, []string{k}, head(1000, 1, 2, 1, 0)).Err(); err != nil {
			t.Errorf("%s with a valid head: %v", kindNames[i], err)
		}
	}
	if err := reserveScript.Run(ctx, db.Client, []string{key}, limit(1000, 1, 1), "1", "-5").Err(); err == nil {
		t.Errorf("reserve with negative maxwait: no error")
	}
	if err := leaseScript.Run(ctx, db.Client, []string{key}, limit(1000, 1, 5), "2", "0", "3").Err(); err == nil {
		t.Errorf("lease with least > n: no error")
	}
	if n := db.Client.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("refused calls wrote the key")
	}
}

// TestSeedTokenBucketFloatDefect shows why the token bucket script works in
// integer µs rather than the seed's float tokens per ms: at 100/s with capacity
// 1, polled every ms after the bucket empties, the seed's ten float refills of
// 0.1 add up to 0.9999999999999999 and it denies the call at 10 ms, when exactly
// one token has been earned; at 9 ms it tells the caller to wait 2 ms instead of
// 1. The integer script admits at 10 ms and says 1 ms at 9 ms.
func TestSeedTokenBucketFloatDefect(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	seedSrc, err := os.ReadFile("testdata/seed_tokenbucket.lua")
	if err != nil {
		t.Fatal(err)
	}
	seed := redis.NewScript(string(seedSrc))
	seedKey := db.Prefix + "{seed}"
	base := int64(1_700_000_000_000) // ms
	seedAt := func(ms int64) []int64 {
		v, err := seed.Run(ctx, db.Client, []string{seedKey}, 1, 0.1, 1, base+ms).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var now int64
	m := NewTokenBucket(db.Client, shaper.Limit{Rate: shaper.PerSecond(100), Burst: 1}, Config{Prefix: db.Prefix})

	if r := seedAt(0); r[0] != 1 {
		t.Fatalf("seed at 0 ms: %v, want allowed", r)
	}
	if d, _ := allowAt(ctx, m, "k", (base+now)*1000, 1); !d.Allowed {
		t.Fatalf("ours at 0 ms: %+v, want allowed", d)
	}
	for ms := int64(1); ms <= 10; ms++ {
		now = ms
		r := seedAt(ms)
		d, err := allowAt(ctx, m, "k", (base+now)*1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ms == 9 {
			if r[2] != 2 {
				t.Errorf("seed retry_after at 9 ms = %d ms; the defect this test shows is gone?", r[2])
			}
			if d.RetryAfter != time.Millisecond {
				t.Errorf("ours: retry after at 9 ms = %v, want 1ms", d.RetryAfter)
			}
		}
		if ms < 10 && (r[0] != 0 || d.Allowed) {
			t.Errorf("at %d ms: seed %v, ours %+v; want both denied", ms, r, d)
		}
		if ms == 10 {
			if r[0] != 0 {
				t.Errorf("seed at 10 ms: %v; the float defect this test shows is gone?", r)
			}
			if !d.Allowed {
				t.Errorf("ours at 10 ms: %+v, want allowed (one token earned in 10 ms at 100/s)", d)
			}
		}
	}
}

// FuzzParseReply: the reply parser never panics and accepts only arrays of four
// integers with allowed ∈ {0, 1} and non-negative waits. (That every element is
// an integer is checked by go-redis's IntSliceCmd, see TestMeterRejectsBadReply.)
func FuzzParseReply(f *testing.F) {
	f.Add(int64(1), int64(4), int64(0), int64(10), 4)
	f.Add(int64(0), int64(0), int64(-1), int64(0), 3)
	f.Add(int64(2), int64(0), int64(0), int64(0), 5)
	f.Fuzz(func(t *testing.T, a, b, c, d int64, n int) {
		vals := []int64{a, b, c, d, 0, 0}
		v := vals[:max(0, min(n, len(vals)))]
		r, err := parseReply(v)
		valid := n == 4 && (a == 0 || a == 1) && c >= 0 && d >= 0
		if valid != (err == nil) {
			t.Fatalf("parseReply(%v) = %v, %v", v, r, err)
		}
	})
}

// TestLeaseScriptContract table-tests lease.lua at fixed times: take up to n,
// take nothing below least (with the wait for least), give back.
func TestLeaseScriptContract(t *testing.T) {
	db := redistest.Connect(t)
	var now int64 = 1_700_000_000_000_000
	m := NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}, Config{Prefix: db.Prefix})
	l := m.Lease("k", LeaseConfig{Batch: 10, LowWater: 1})
	ctx := context.Background()
	for _, tc := range []struct {
		name                  string
		dt                    int64 // µs after the previous step
		want, least, giveback int64
		out                   [4]int64 // taken, remaining, retry µs, reset µs
	}{
		{"take 8 of 10", 0, 8, 1, 0, [4]int64{8, 2, 0, 800_000}},
		{"take up to 5: 2", 0, 5, 1, 0, [4]int64{2, 0, 0, 1_000_000}},
		{"none left: wait for 3", 0, 5, 3, 0, [4]int64{0, 0, 300_000, 1_000_000}},
		{"100ms later, least 3 of 1", 100_000, 5, 3, 0, [4]int64{0, 1, 200_000, 900_000}},
		{"give back 4, take 2", 0, 2, 1, 4, [4]int64{2, 3, 0, 700_000}},
		{"give back more than taken: empty", 0, 0, 0, 10, [4]int64{0, 10, 0, 0}},
	} {
		now += tc.dt
		got, err := leaseAt(ctx, l, now, tc.want, tc.least, tc.giveback)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.out {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.out)
		}
	}
	if n := db.Client.Exists(ctx, m.Key("k")).Val(); n != 0 {
		t.Errorf("an empty debt left the key behind")
	}
}

// TestReserveScriptContract table-tests reserve.lua at fixed times: 10/s, burst
// 2, at most 150ms of wait.
func TestReserveScriptContract(t *testing.T) {
	db := redistest.Connect(t)
	var now int64 = 1_700_000_000_000_000
	q := NewQueue(db.Client, "q", shaper.PerSecond(10), QueueConfig{Burst: 2, MaxWait: 150 * time.Millisecond}, Config{Prefix: db.Prefix})
	ctx := context.Background()
	reserve := func(n, maxwait int64) [3]int64 {
		var out [7]int64
		if err := evalKey(ctx, db.Client, testScripts.reserve, q.Key(), out[:], q.rl.arg, n, maxwait, 0, now); err != nil {
			t.Fatal(err)
		}
		return [3]int64(out[:3])
	}
	for _, tc := range []struct {
		name string
		dt   int64
		n    int64
		out  [3]int64 // taken, wait µs, reset µs
	}{
		{"burst 1/2", 0, 1, [3]int64{1, 0, 100_000}},
		{"burst 2/2", 0, 1, [3]int64{1, 0, 200_000}},
		{"next slot in 100ms", 0, 1, [3]int64{1, 100_000, 300_000}},
		{"cost 2: 300ms > 150ms, not taken", 0, 2, [3]int64{0, 300_000, 300_000}},
		{"then cost 1 still 200ms", 0, 1, [3]int64{0, 200_000, 300_000}},
		{"60ms later: 140ms, taken", 60_000, 1, [3]int64{1, 140_000, 340_000}},
		{"idle 1s: burst again", 1_000_000, 2, [3]int64{1, 0, 200_000}},
	} {
		now += tc.dt
		if got := reserve(tc.n, 150_000); got != tc.out {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.out)
		}
	}
}

// TestReserveWritesPackedScheduleReadsText: reserve.lua and unreserve.lua
// write the schedule packed ('<dd', 16 bytes: the reply's end_tat, end_rem;
// after a give-back, its prev_tat, prev_rem), and read a schedule stored as
// text ("tat rem", as the previous version writes it) as the same schedule,
// so that processes of both versions share one schedule during a rolling
// deploy. One sequence of reservations and a give-back runs on two queues,
// the second's schedule rewritten as text before every call; both must
// answer the same.
func TestReserveWritesPackedScheduleReadsText(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	var now int64 = 1_700_000_000_000_000
	mk := func(name string) *Queue {
		return NewQueue(db.Client, name, shaper.PerSecond(10), QueueConfig{Burst: 2, MaxWait: 150 * time.Millisecond}, Config{Prefix: db.Prefix})
	}
	packed, text := mk("packed"), mk("text")
	get := func(q *Queue) (string, bool) {
		v, err := db.Client.Get(ctx, q.Key()).Result()
		if err == redis.Nil {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return v, true
	}
	rewrites := 0
	retext := func() {
		v, ok := get(text)
		if !ok {
			return
		}
		if strings.Contains(v, " ") && len(v) != 16 {
			return // text already: the last call wrote nothing (not taken)
		}
		tat, rem, ok := unpackSchedule(v)
		if !ok {
			t.Fatalf("schedule %q is not the packed one this version writes", v)
		}
		if err := db.Client.Set(ctx, text.Key(), fmt.Sprintf("%d %d", tat, rem), redis.KeepTTL).Err(); err != nil {
			t.Fatal(err)
		}
		rewrites++
	}
	reserve := func(q *Queue, n int64) [7]int64 {
		var out [7]int64
		if err := evalKey(ctx, db.Client, testScripts.reserve, q.Key(), out[:], q.rl.arg, n, 150_000, 0, now); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// wrote checks that the packed queue's schedule is tat, rem packed.
	wrote := func(what string, tat, rem int64) {
		if v, _ := get(packed); v != packSchedule(tat, rem) {
			t.Fatalf("%s: schedule %q, want %d, %d packed (%q)", what, v, tat, rem, packSchedule(tat, rem))
		}
	}
	var last [7]int64
	for i, step := range []struct{ dt, n int64 }{{0, 1}, {0, 1}, {0, 1}, {0, 2}, {60_000, 1}, {1_000_000, 2}, {0, 1}} {
		now += step.dt
		retext()
		a, b := reserve(packed, step.n), reserve(text, step.n)
		if a != b {
			t.Fatalf("step %d: reserve = %v on a packed schedule, %v on the same schedule as text", i, a, b)
		}
		if a[0] == 1 {
			wrote(fmt.Sprintf("step %d", i), a[3], a[4])
			last = a
		}
	}
	if rewrites < 5 {
		t.Fatalf("only %d schedules were rewritten as text: the comparison saw too few", rewrites)
	}
	if last[5] < now {
		t.Fatalf("the last reservation %v followed an idle schedule: its give-back would delete, not write", last)
	}
	retext()
	unreserve := func(q *Queue, r [7]int64) int64 {
		v, err := testScripts.unreserve.Run(ctx, db.Client, []string{q.Key()}, q.rl.arg, 0, r[3], r[4], r[5], r[6], now).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := unreserve(packed, last), unreserve(text, last); a != 1 || b != 1 {
		t.Fatalf("give-back of the last reservation = %d on the packed schedule, %d on the text one; want 1, 1", a, b)
	}
	wrote("after the give-back", last[5], last[6])
	if v, _ := get(text); v != packSchedule(last[5], last[6]) {
		t.Fatalf("the give-back on the text schedule wrote %q, want %d, %d packed", v, last[5], last[6])
	}
	if a, b := reserve(packed, 1), reserve(text, 1); a != b {
		t.Fatalf("after the give-back: reserve = %v on the packed schedule, %v on the text one's successor", a, b)
	}
}

// unpackSchedule decodes a schedule as reserve.lua writes it (packSchedule);
// ok is false unless v is 16 bytes of two integers.
func unpackSchedule(v string) (tat, rem int64, ok bool) {
	if len(v) != 16 {
		return 0, 0, false
	}
	a := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[:8])))
	b := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8:])))
	if a != math.Trunc(a) || b != math.Trunc(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return 0, 0, false
	}
	return int64(a), int64(b), true
}

// packSchedule is a schedule as reserve.lua writes it: tat and rem packed as
// two little-endian doubles (struct.pack('<dd')).
func packSchedule(tat, rem int64) string {
	buf := binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(tat)))
	return string(binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(rem))))
}

// TestReservePackedScheduleNotReadAsText: a packed schedule whose bytes also
// parse as text (Lua's tonumber reads a string up to its first zero byte:
// 1759218605361165 packed starts "4 8\0", 1765914459342861 and 476291 hold
// " 6\0" after a "4") is read as the packed schedule it is: reserve.lua finds
// it busy, not idle (a text-first read takes it for "4 8" and resets it), and
// unreserve.lua gives back the reservation that wrote it.
func TestReservePackedScheduleNotReadAsText(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	q := NewQueue(db.Client, "q", shaper.PerSecond(10), QueueConfig{Burst: 2}, Config{Prefix: db.Prefix})
	for _, s := range [][2]int64{{1759218605361165, 0}, {1765914459342861, 476291}} {
		now := s[0] - 300_000 // the schedule ends 300ms from now: busy
		set := func() {
			if err := db.Client.Set(ctx, q.Key(), packSchedule(s[0], s[1]), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		set()
		var out [7]int64
		if err := evalKey(ctx, db.Client, testScripts.reserve, q.Key(), out[:], q.rl.arg, 1, 10_000_000, 0, now); err != nil {
			t.Fatal(err)
		}
		if out[0] != 1 || out[5] != s[0] || out[6] != s[1] {
			t.Errorf("schedule %v packed: reserve = %v, want taken from prev_tat, prev_rem %d, %d", s, out, s[0], s[1])
		}
		set()
		v, err := testScripts.unreserve.Run(ctx, db.Client, []string{q.Key()}, q.rl.arg, 0, s[0], s[1], s[0]-100_000, 0, now).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if v != 1 {
			t.Errorf("schedule %v packed: unreserve of the reservation that ended it = %d, want 1", s, v)
		}
	}
}

// TestMeterRejectsBadReply: a script reply that is not an array of integers is
// an error before parseReply (go-redis's IntSliceCmd), and a NOSCRIPT is
// answered with EVAL of the source.
func TestMeterRejectsBadReply(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	for _, tc := range []struct {
		src string
		ok  bool
	}{
		{"return {1, 2, 3, 4}", true},
		{"return {1, 'x', 3, 4}", false},
		{"return 'OK'", false},
		{"return {1, {2}, 3, 4}", false},
	} {
		src := tc.src + " -- " + t.Name()
		h := redisscript.New(src)
		buf := new(evalBuf)
		args := buf.fill(db.Prefix+"{k}", newRedisLimit("t", shaper.Limit{Rate: shaper.PerSecond(1)}, false), 1, 0)
		v, err := h.EvalInts(ctx, db.Client, args) // a fresh script: NOSCRIPT, then EVAL
		if (err == nil) != tc.ok {
			t.Errorf("%s: EvalInts = %v, %v", tc.src, v, err)
		}
	}
}

// TestBatchScriptMatchesSingle: one call of a meter's batch script (keys
// repeated, costs varied, at one test time) returns what the single-key script
// returns called once per key in the same order at that time, for every
// algorithm; a cost above the burst fails the batch.
func TestBatchScriptMatchesSingle(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	keys := []string{"a", "a", "b", "a", "b", "c", "a"}
	costs := []int64{1, 2, 0, 3, 5, 1, 4}
	for kind := range kinds {
		t.Run("algo="+kindNames[kind], func(t *testing.T) {
			k := kinds[kind]
			lim := shaper.Limit{Rate: shaper.Rate{Count: 8, Period: time.Second}}
			rl := newRedisLimit("t", lim, k.window)
			single, multi := testScripts.meter[kind], testScripts.batch[kind]
			for step, now := range []int64{1_700_000_000_000_000, 1_700_000_000_250_000, 1_700_000_002_000_000} {
				var want []int64
				for i, key := range keys {
					buf := new(evalBuf)
					v, err := single.EvalInts(ctx, db.Client, fillAt(buf, db.Prefix+kindNames[kind]+":s:{"+key+"}", rl, costs[i], now))
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, v...)
				}
				b := newBatcher(db.Client, 0, single, multi)
				var batch []*bcall
				for i, key := range keys {
					buf := new(evalBuf)
					batch = append(batch, &bcall{args: fillAt(buf, db.Prefix+kindNames[kind]+":m:{"+key+"}", rl, costs[i], now)})
				}
				if !b.execMulti(ctx, batch) {
					t.Fatal("execMulti refused a batch of one limit")
				}
				var got []int64
				for _, c := range batch {
					if c.err != nil {
						t.Fatal(c.err)
					}
					got = append(got, c.v...)
				}
				if !slices.Equal(got, want) {
					t.Errorf("step %d: batch %v, single calls %v", step, got, want)
				}
			}
			single, multi = scripts.meter[kind], scripts.batch[kind] // no pinned time
			bad := []*bcall{
				{args: new(evalBuf).fill(db.Prefix+kindNames[kind]+":x:{a}", rl, 1, 0)},
				{args: new(evalBuf).fill(db.Prefix+kindNames[kind]+":x:{b}", rl, rl.max+1, 0)},
			}
			newBatcher(db.Client, 0, single, multi).execMulti(ctx, bad)
			if err := bad[1].err; err == nil || !strings.Contains(err.Error(), "invalid arguments") {
				t.Errorf("batch with cost %d > burst: %v", rl.max+1, err)
			}
		})
	}
}
