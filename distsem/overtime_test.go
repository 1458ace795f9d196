package distsem

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// The fast paths of the scripts, each with the name its coverage counter has
// in TestFastPathsMatchGeneralPathsOverTime: the text of its return (unique in
// the assembled script) and the name.
var fastReturns = []struct {
	script *redisscript.Script
	ret    string
	name   string
}{
	{acquireScript, "return spack(R5, 1, fence, limit0, used, 0)", "acquire-grant"},
	{acquireScript, "return spack(R7, 0, 0, limit0, used0, pos,", "acquire-queued"},
	{renewScript, "return spack(R3, 1, limit0, used0)", "renew"},
	{releaseScript, "return spack(R3, 1, limit0, used)", "release"},
	{releaseScript, "return spack(R3, 1, limit0, after)", "release-handoff"},
}

// TestFastPathsMatchGeneralPathsOverTime runs one random sequence of calls
// against two semaphores, one with the scripts as built and one with their
// fast paths disabled, as TestFastPathsMatchGeneralPaths does, but with the
// scripts' time under the test's control: every read of the time reads a
// hash the test sets (KEYS[1] .. ':clock') instead of calling TIME, and the test
// moves it on by random steps, often to just before, at or after the next
// instant something comes due, so leases, heartbeats, tombstones and the key
// TTL refresh (ta) expire and come due between the calls, and the calls meet
// their edges. Now and then the state is damaged (a key deleted, a field of S
// deleted, used or he made wrong), the same way on both. After every step
// both must have answered the same, hold exactly the same (every field and value of the hashes, every member and score of the
// sets: the time is the same for both, so fences and expiries are too), have
// refreshed the TTL of the same keys, and have published the same hand-off
// messages on the same channels.
//
// release.lua's first fast path skips, by its contract, what only the time
// could call for (reaping, sweeping tombstones, the TTL refresh: see there),
// which the general path does when it is due. Here it runs only when the
// time is in head.lua's fast interval, where nothing is due (its condition
// gets that test in both variants, after reading the time); so it is compared
// whenever it leaves nothing undone, and TestFastPathsMatchGeneralPaths
// (where nothing ever comes due) covers it as built.
//
// Each fast path counts the calls it answers (a HINCRBY on KEYS[1] ..
// ':cov', inserted before its return; not a key the comparison reads), and
// the test requires a minimum of each, so that it cannot pass without
// comparing them; and a minimum of each thing the time does (a lease reaped,
// a waiter dropped, a tombstone swept, a TTL refresh).
//
// It runs with the state written in each format (see PACKED in head.lua).
// The fast paths run only in a version that writes the state packed, so
// with text the test requires that none is ever taken, and compares the
// general path with itself over time.
func TestFastPathsMatchGeneralPathsOverTime(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) { fastPathsOverTime(t, f.packed) })
	}
}

func fastPathsOverTime(t *testing.T, packed bool) {
	cfg := Config{Lease: time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 300 * time.Millisecond}), WaiterTTL: time.Second, TombstoneTTL: 500 * time.Millisecond}
	fp := newFastPair(t, 3, cfg, packed)
	db, sems, keyTTL, ctx := fp.db, fp.sems, fp.keyTTL, context.Background()

	rnd := uint64(20261203)
	next := func(n uint64) int64 {
		rnd = rnd*6364136223846793005 + 1442695040888963407
		return int64((rnd >> 33) % n)
	}
	const slots = 8
	var gens [slots]int
	tokOf := func(slot int64) string { return "k" + strconv.FormatInt(slot, 10) + "." + strconv.Itoa(gens[slot]) }
	slotOf := func(tok string) int64 {
		n, _ := strconv.ParseInt(strings.TrimPrefix(tok[:strings.IndexByte(tok, '.')], "k"), 10, 64)
		return n
	}
	// pick returns a member of sems[0]'s key k (1: H, 2: Q) most of the
	// time, else any token.
	pick := func(k int) string {
		if next(8) != 0 {
			if m, _ := db.Client.ZRange(ctx, sems[0].keys[k], 0, -1).Result(); len(m) > 0 {
				return m[next(uint64(len(m)))]
			}
		}
		return tokOf(next(slots))
	}
	// lease returns the lease of a call (ms): 0.5 to 2.5 s, so that a
	// hand-off grant is sometimes cut short by the waiter's heartbeat.
	lease := func() int64 { return 500 + next(2000) }
	fences, weights := map[string]int64{}, map[string]int64{} // as the Permits kfp.now them
	var prev semState
	var reaped, dropped, swept, refreshed int
	for step := range 3000 {
		// The time moves on: mostly by a few ms, sometimes by up to a lease
		// or a heartbeat, rarely past a key TTL refresh (keyTTL / 4); and
		// often to just before, at or after the next instant something
		// comes due (a bound of S, the earliest lease, heartbeat or
		// tombstone), so that the calls meet those edges.
		switch r := next(100); {
		case r < 60:
			fp.now += next(30_000)
		case r < 70:
			fp.now += next(1_500_000)
		case r < 73:
			fp.now += keyTTL/4*1000 + next(1_000_000)
		default:
			var due []int64 // ms
			for f, v := range prev.h[":s"] {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
					switch f {
					case "he", "tn":
						due = append(due, n)
					case "ta":
						due = append(due, n+keyTTL/4)
					}
				}
			}
			for _, k := range []string{":h", ":qe", ":t"} {
				for _, v := range prev.z[k] {
					due = append(due, int64(v))
				}
			}
			slices.Sort(due)
			if i, _ := slices.BinarySearch(due, fp.now/1000); i < len(due) {
				if at := (due[i]+next(3)-1)*1000 + next(1000); at > fp.now {
					fp.now = at
				}
			}
		}
		fp.prepare()

		var desc string
		var got []int64
		op := next(20)
		switch {
		case op < 3: // damage, the same on both
			var do func(s *Semaphore)
			switch next(7) {
			case 0:
				// he above the earliest lease: S says no lease expires
				// before it (a corrupt bound).
				he := fp.now/1000 + next(3000)
				desc = "HSET :s he " + strconv.FormatInt(he, 10)
				do = func(s *Semaphore) { setS(t, db.Client, s.keys[0], "he", he) }
			case 1:
				// used wrong (below or above what is held).
				used := next(5)
				desc = "HSET :s used " + strconv.FormatInt(used, 10)
				do = func(s *Semaphore) { setS(t, db.Client, s.keys[0], "used", used) }
			case 2, 3:
				k := 1 + next(5)
				desc = "DEL " + sems[0].keys[k]
				do = func(s *Semaphore) { db.Client.Del(ctx, s.keys[k]) }
			default:
				f := []string{"fence", "nq", "tn", "he", "ta", "seq", "used", "limit"}[next(8)]
				desc = "lose :s " + f
				do = func(s *Semaphore) { delS(t, db.Client, s.keys[0], f) }
			}
			fp.both(do)
		default:
			var sc int // acquire, release, renew
			var tok string
			var args []any
			switch {
			case op < 10: // acquire: try, queue, or a waiter's heartbeat
				queue := next(3) != 0
				tok = tokOf(next(slots))
				if queue && next(3) == 0 {
					tok = pick(2)
				}
				args = []any{1 + next(2), lease(), b2i(queue), cfg.WaiterTTL.Milliseconds(), "p" + strconv.FormatInt(next(2), 10)}
			case op < 16: // release: a holder's, a waiter's, anyone's
				sc = 1
				tok = pick(1)
				if next(8) == 0 {
					tok = pick(2)
				}
				var w int64 // the weight a Permit kfp.nows, or 0 (unkfp.nown)
				if next(3) != 0 {
					w = weights[tok]
				}
				var limit int64
				if next(20) == 0 {
					limit = 2 + next(3)
					if next(2) == 0 {
						tok = "" // SetLimit
					}
				}
				args = []any{cfg.TombstoneTTL.Milliseconds(), limit, b2i(next(4) == 0), w}
			case op < 20: // renew, re-adopt or carry (of a waiter too: then it is held and queued)
				sc = 2
				tok = pick(1)
				if next(4) == 0 {
					tok = pick(2)
				}
				w, err := db.Client.HGet(ctx, sems[0].keys[4], "w:"+tok).Int64()
				if err != nil {
					w = 1 + next(2)
				}
				args = []any{w, lease(), fences[tok], next(3)}
			}
			desc = fmt.Sprintf("%s(%q, %v)", []string{"acquire", "release", "renew"}[sc], tok, args)
			got = fp.call("step "+strconv.Itoa(step)+": "+desc, sc, tok, args...)
			if sc == 0 && got[0] == stGranted {
				fences[tok] = got[1]
			}
			if sc == 0 && (got[0] == stGranted || got[0] == stQueued) {
				weights[tok] = args[0].(int64)
			}
			if sc == 1 && tok != "" && (args[2] == 1 || got[0] != 1) {
				gens[slotOf(tok)]++ // tombstoned: its slot takes a new token
			}
		}

		st := fp.check("step " + strconv.Itoa(step) + ": after " + desc)
		// What the time did in this step (seen on calls only, not damage).
		if op >= 3 {
			p, c := prev, st
			for tok := range p.z[":h"] {
				if _, ok := c.z[":h"][tok]; !ok && !strings.Contains(desc, strconv.Quote(tok)) {
					reaped++
				}
			}
			for tok := range p.z[":qe"] {
				if _, ok := c.z[":qe"][tok]; !ok && !strings.Contains(desc, strconv.Quote(tok)) {
					if _, held := c.z[":h"][tok]; !held {
						dropped++
					}
				}
			}
			for tok := range p.z[":t"] {
				if _, ok := c.z[":t"][tok]; !ok {
					swept++
				}
			}
			if p.h[":s"]["ta"] != "" && c.h[":s"]["ta"] != p.h[":s"]["ta"] {
				refreshed++
			}
		}
		prev = st
	}

	covered := fp.coverage()
	t.Logf("fast paths taken: %v; leases reaped %d, waiters dropped %d, tombstones swept %d, TTL refreshes %d", covered, reaped, dropped, swept, refreshed)
	for _, f := range fastReturns {
		switch {
		case !packed && covered[f.name] != 0:
			// The fast paths write the state packed, so they run only
			// in a version that does (see head.lua's whole).
			t.Errorf("fast path %s taken %d times writing text, want none", f.name, covered[f.name])
		case packed && covered[f.name] < 30:
			t.Errorf("fast path %s taken %d times, want at least 30", f.name, covered[f.name])
		}
	}
	for what, n := range map[string]int{"leases reaped": reaped, "waiters dropped": dropped, "tombstones swept": swept, "TTL refreshes": refreshed} {
		if n < 10 {
			t.Errorf("%s: %d, want at least 10 (the time must matter)", what, n)
		}
	}
}

// fastPair is two semaphores of the same limit and Config, one with the
// scripts of overTimeScripts as built, one with their fast paths disabled,
// and the time of both (µs, set by the test).
type fastPair struct {
	t       *testing.T
	db      *redistest.DB
	sems    [2]*Semaphore
	scripts [2][3]*redisscript.Script // acquire, release, renew
	keyTTL  int64                     // ms
	ps      *redis.PubSub
	now     int64
	marks   int
}

func newFastPair(t *testing.T, limit int64, cfg Config, packed bool) *fastPair {
	t.Helper()
	built, without := overTimeScripts(t, packed)
	fp := &fastPair{t: t, db: redistest.Connect(t), scripts: [2][3]*redisscript.Script{built, without}, now: 1_795_978_983_896_001}
	for i := range fp.sems {
		fp.sems[i] = New(fp.db.Client, fp.db.Prefix+"sem"+strconv.Itoa(i), limit, cfg)
		t.Cleanup(func() { fp.sems[i].Close() })
	}
	fp.keyTTL = fp.sems[0].keyTTL
	// Hand-off messages, on both semaphores' channels (the channel is
	// prefix + the waiter's notify id).
	ctx := context.Background()
	fp.ps = fp.db.Client.PSubscribe(ctx, fp.sems[0].chanPrefix+"*", fp.sems[1].chanPrefix+"*")
	t.Cleanup(func() { fp.ps.Close() })
	for range 2 {
		if _, err := fp.ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return fp
}

// prepare sets the scripts' time to fp.now, and every key's TTL to a mark
// above the key TTL, so that after the step a TTL at most the key TTL tells
// a key the step gave one.
func (fp *fastPair) prepare() {
	ctx := context.Background()
	if _, err := fp.db.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range fp.sems {
			p.HSet(ctx, s.keys[0]+":clock", "s", fp.now/1e6, "us", fp.now%1e6)
			for _, k := range s.keys {
				p.PExpire(ctx, k, 10*time.Duration(fp.keyTTL)*time.Millisecond)
			}
		}
		return nil
	}); err != nil {
		fp.t.Fatal(err)
	}
}

// both does do to each semaphore (the same damage, say).
func (fp *fastPair) both(do func(s *Semaphore)) {
	for _, s := range fp.sems {
		do(s)
	}
}

// call runs script sc (0 acquire, 1 release, 2 renew) on both and returns the
// reply, the same from both.
func (fp *fastPair) call(desc string, sc int, tok string, args ...any) []int64 {
	fp.t.Helper()
	var got [2][]int64
	for i, s := range fp.sems {
		v, err := s.eval(context.Background(), fp.scripts[i][sc], tok, args...)
		if err != nil {
			fp.t.Fatalf("%s: %v", desc, err)
		}
		got[i] = v
	}
	if !slices.Equal(got[0], got[1]) {
		fp.t.Fatalf("%s = %v with fast paths, %v without", desc, got[0], got[1])
	}
	return got[0]
}

// check requires both to hold the same, every key to have a TTL, and the
// same messages to have been published since the last check; it returns
// what the first holds.
func (fp *fastPair) check(desc string) semState {
	fp.t.Helper()
	var st [2]semState
	for i, s := range fp.sems {
		st[i] = readState(fp.t, fp.db.Client, s, fp.keyTTL)
	}
	if d := st[0].diff(st[1]); d != "" {
		fp.t.Fatalf("%s: %s\nwith fast paths: %+v\nwithout: %+v", desc, d, st[0], st[1])
	}
	for k, ttl := range st[0].ttl {
		if ttl == "none" {
			fp.t.Fatalf("%s: %s has no TTL", desc, k)
		}
	}
	if m := fp.messages(); !slices.Equal(m[0], m[1]) {
		fp.t.Fatalf("%s: published %q with fast paths, %q without", desc, m[0], m[1])
	}
	return st[0]
}

// messages returns the messages published on each semaphore's channels
// since the last call, as "<notify id> <payload>": it publishes a mark on
// each and reads up to both (a subscriber gets the messages in the order
// they were published).
func (fp *fastPair) messages() [2][]string {
	ctx := context.Background()
	var got [2][]string
	fp.marks++
	mark := "sync-" + strconv.Itoa(fp.marks)
	for _, s := range fp.sems {
		fp.db.Client.Publish(ctx, s.chanPrefix+"sync", mark)
	}
	for seen := 0; seen < 2; {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := fp.ps.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			fp.t.Fatalf("waiting for the published messages: %v", err)
		}
		for i, s := range fp.sems {
			if id, ok := strings.CutPrefix(m.Channel, s.chanPrefix); ok {
				if id == "sync" && m.Payload == mark {
					seen++
				} else {
					got[i] = append(got[i], id+" "+m.Payload)
				}
			}
		}
	}
	return got
}

// coverage returns how often each fast path answered (with the fast paths
// disabled, none must have).
func (fp *fastPair) coverage() map[string]int64 {
	covered := map[string]int64{}
	for i, s := range fp.sems {
		c, err := fp.db.Client.HGetAll(context.Background(), s.keys[0]+":cov").Result()
		if err != nil {
			fp.t.Fatal(err)
		}
		for name, v := range c {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i == 1 {
				fp.t.Errorf("fast path %s taken %d times with the fast paths disabled", name, n)
			}
			covered[name] = n
		}
	}
	return covered
}

// overTimeScripts returns the scripts (acquire, release, renew) of
// TestFastPathsMatchGeneralPathsOverTime: as built, and with the fast paths
// disabled; both with the test's clock and the coverage counters, and with
// release.lua's first fast path only in the fast interval; the state written packed
// or as text.
func overTimeScripts(t *testing.T, packed bool) (built, without [3]*redisscript.Script) {
	t.Helper()
	replace := func(src, from, to string) string {
		t.Helper()
		if n := strings.Count(src, from); n != 1 {
			t.Fatalf("%q occurs %d times in a script, want once", from, n)
		}
		return strings.Replace(src, from, to, 1)
	}
	for i, sc := range []*redisscript.Script{acquireScript, releaseScript, renewScript} {
		// Every read of the time, a fast path's (call) and common.lua's
		// (redis.call).
		src := withFormat(t, assembleSource(sc), packed)
		if n := strings.Count(src, "local tm = call('TIME')") + strings.Count(src, "local tm = redis.call('TIME')"); n != 2 {
			t.Fatalf("the time is read %d times in a script, want twice", n)
		}
		src = strings.ReplaceAll(src, "local tm = redis.call('TIME')", "local tm = redis.call('HMGET', KEYS[1] .. ':clock', 's', 'us')")
		src = strings.ReplaceAll(src, "local tm = call('TIME')", "local tm = call('HMGET', KEYS[1] .. ':clock', 's', 'us')")
		for _, f := range fastReturns {
			if f.script == sc {
				src = replace(src, f.ret, "redis.call('HINCRBY', KEYS[1] .. ':cov', '"+f.name+"', 1) "+f.ret)
			}
		}
		if sc == releaseScript {
			// Confined to the fast interval, which needs the time: read here, only when settled.
			src = replace(src, "if settled and he0 ~= -1 and", "if settled and (function() local tm = redis.call('HMGET', KEYS[1] .. ':clock', 's', 'us') now, now_us = tm[1] * 1000 + math.floor(tm[2] / 1000), tm[1] * 1000000 + tm[2] return true end)() and now >= fast_from and now < fast_until and he0 ~= -1 and")
		}
		built[i] = redisscript.NewPacked(src)
		without[i] = redisscript.NewPacked(withoutFastPaths(t, src))
	}
	return built, without
}

// semState is what a semaphore holds: its hashes (S, D: field -> value), its
// sorted sets (H, Q, QE, T: member -> score) and the TTL of each key ("gone",
// "none", "fresh" (given by the last step) or "old"), each by the suffix of
// its key (":s", ":h", ...).
type semState struct {
	h   map[string]map[string]string
	z   map[string]map[string]float64
	ttl map[string]string
}

func readState(t *testing.T, c *redis.Client, s *Semaphore, keyTTL int64) semState {
	t.Helper()
	ctx := context.Background()
	st := semState{h: map[string]map[string]string{}, z: map[string]map[string]float64{}, ttl: map[string]string{}}
	hs := make([]*redis.MapStringStringCmd, len(s.keys))
	zs := make([]*redis.ZSliceCmd, len(s.keys))
	ttls := make([]*redis.DurationCmd, len(s.keys))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range s.keys {
			if i == 0 || i == 4 {
				hs[i] = p.HGetAll(ctx, k)
			} else {
				zs[i] = p.ZRangeWithScores(ctx, k, 0, -1)
			}
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, k := range s.keys {
		suf := k[strings.LastIndexByte(k, ':'):]
		if i == 0 {
			st.h[suf] = decodeS(hs[i].Val())
		} else if hs[i] != nil {
			st.h[suf] = hs[i].Val()
		} else {
			m := map[string]float64{}
			for _, z := range zs[i].Val() {
				m[z.Member.(string)] = z.Score
			}
			st.z[suf] = m
		}
		switch ttl := ttls[i].Val(); {
		case ttl == -2:
			st.ttl[suf] = "gone"
		case ttl == -1:
			st.ttl[suf] = "none"
		case ttl <= time.Duration(keyTTL)*time.Millisecond:
			st.ttl[suf] = "fresh"
		default:
			st.ttl[suf] = "old"
		}
	}
	return st
}

// diff describes how a differs from b, or returns "".
func (a semState) diff(b semState) string {
	for k, m := range a.h {
		if !maps.Equal(m, b.h[k]) {
			return fmt.Sprintf("%s = %v with fast paths, %v without", k, m, b.h[k])
		}
	}
	for k, m := range a.z {
		if !maps.Equal(m, b.z[k]) {
			return fmt.Sprintf("%s = %v with fast paths, %v without", k, m, b.z[k])
		}
	}
	if !maps.Equal(a.ttl, b.ttl) {
		return fmt.Sprintf("TTLs %v with fast paths, %v without", a.ttl, b.ttl)
	}
	return ""
}

// TestFastPathEdges: the fast paths against the general path (as in
// TestFastPathsMatchGeneralPathsOverTime) in states the random sequence
// seldom reaches, each with how often each fast path must answer (fast).
func TestFastPathEdges(t *testing.T) {
	cfg := Config{Lease: time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 300 * time.Millisecond}), WaiterTTL: time.Second, TombstoneTTL: 500 * time.Millisecond}
	type step struct {
		desc string
		sc   int // 0 acquire, 1 release, 2 renew; -1: do
		tok  string
		args []any
		do   func(db *redistest.DB, s *Semaphore)
	}
	acq := func(tok string, w int64, queue bool) step {
		return step{"acquire " + tok, 0, tok, []any{w, 1000, b2i(queue), 1000, "p0"}, nil}
	}
	rel := func(tok string, w int64) step { return step{"release " + tok, 1, tok, []any{500, 0, 0, w}, nil} }
	hdel := func(f string) step {
		return step{desc: "lose :s " + f, sc: -1, do: func(db *redistest.DB, s *Semaphore) { delS(t, db.Client, s.keys[0], f) }}
	}
	hset := func(f string, v int64) step {
		return step{desc: "set :s " + f, sc: -1, do: func(db *redistest.DB, s *Semaphore) { setS(t, db.Client, s.keys[0], f, v) }}
	}
	for _, tc := range []struct {
		name  string
		limit int64
		steps []step
		fast  map[string]int64
	}{
		{"a waiter queued after seq was lost", 1, []step{
			acq("a", 1, false), acq("b", 1, true), hdel("seq"), acq("c", 1, true),
		}, map[string]int64{"acquire-queued": 1}}, // b only
		// A state with a negative weight in use or a limit below 1 is
		// not whole (head.lua): the general path heals the one (used 0)
		// and replaces the other with the configured limit.
		{"a negative weight in use", 3, []step{
			acq("a", 1, false), hset("used", -2), acq("b", 1, false), rel("b", 1),
		}, map[string]int64{"release": 1}}, // a is the first call (no state yet)
		{"a stored limit of 0", 3, []step{
			acq("a", 1, false), hset("limit", 0), rel("a", 1), acq("b", 1, false),
		}, map[string]int64{"acquire-grant": 1}},
		{"used below what the release frees (self-heal)", 3, []step{
			acq("a", 2, false), acq("b", 1, false), acq("c", 1, true),
			hset("used", 0),
			rel("a", 2),
		}, map[string]int64{"acquire-grant": 1, "acquire-queued": 1, "release-handoff": 1}},
		{"the released token is the head waiter too", 3, []step{
			acq("a", 3, false), acq("b", 1, true),
			{"carry b", 2, "b", []any{1, 1000, 0, carryArg}, nil},
			hset("used", 2),
			rel("b", 1),
		}, map[string]int64{"acquire-queued": 1}},
		{"seq lost before a hand-off", 1, []step{
			acq("a", 1, false), acq("b", 1, true), hdel("seq"), rel("a", 1),
		}, map[string]int64{"acquire-queued": 1}},
		{"the queue emptied below the limit", 3, []step{
			acq("a", 3, false), acq("b", 1, true), rel("a", 3),
		}, map[string]int64{"acquire-queued": 1, "release-handoff": 1}},
		{"two waiters fit", 3, []step{
			acq("a", 3, false), acq("b", 1, true), acq("c", 1, true), rel("a", 3),
		}, map[string]int64{"acquire-queued": 2}},
		{"the head waiter does not fit", 3, []step{
			acq("a", 2, false), acq("b", 1, false), acq("c", 3, true), rel("b", 1),
		}, map[string]int64{"acquire-grant": 1, "acquire-queued": 1}},
		{"a tombstone left, not due", 1, []step{
			acq("a", 1, false), acq("b", 1, true), rel("x", 0), acq("c", 1, true), rel("a", 1),
		}, map[string]int64{"acquire-queued": 2, "release-handoff": 1}},
		{"a tombstone written, the weight read", 1, []step{
			acq("a", 1, false), acq("b", 1, true), {"release a (tombstone)", 1, "a", []any{500, 0, 1, 0}, nil},
		}, map[string]int64{"acquire-queued": 1, "release-handoff": 1}},
	} {
		for _, f := range formats {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				fp := newFastPair(t, tc.limit, cfg, f.packed)
				for _, st := range tc.steps {
					fp.now += 1000 // 1 ms: nothing comes due
					fp.prepare()
					if st.sc < 0 {
						fp.both(func(s *Semaphore) { st.do(fp.db, s) })
					} else {
						fp.call(st.desc, st.sc, st.tok, st.args...)
					}
					fp.check("after " + st.desc)
				}
				want := tc.fast
				if !f.packed {
					want = map[string]int64{} // see fastPathsOverTime
				}
				if got := fp.coverage(); !maps.Equal(got, want) {
					t.Errorf("fast paths taken %v, want %v", got, want)
				}
			})
		}
	}
}
