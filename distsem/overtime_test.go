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
	{acquireScript, "return {1, fence, limit0, used, 0}", "acquire-grant"},
	{acquireScript, "return {0, 0, limit0, used0, pos,", "acquire-queued"},
	{renewScript, "return {1, limit0, used0}", "renew"},
	{releaseScript, "return {1, limit0, used}", "release"},
}

// TestFastPathsMatchGeneralPathsOverTime runs one random sequence of calls
// against two semaphores, one with the scripts as built and one with their
// fast paths disabled, as TestFastPathsMatchGeneralPaths does, but with the
// scripts' time under the test's control: clock() reads the time from a hash
// the test sets (KEYS[1] .. ':clock') instead of calling TIME, and the test
// moves it on by random steps, so leases, heartbeats, tombstones and the key
// TTL refresh (ta) expire and come due between the calls. Now and then the
// state is damaged (a key deleted, a field of S deleted), the same way on
// both. After every step both must have answered the same, hold exactly the
// same (every field and value of the hashes, every member and score of the
// sets: the time is the same for both, so fences and expiries are too), have
// refreshed the TTL of the same keys, and have published the same hand-off
// messages on the same channels.
//
// release.lua's first fast path skips, by its contract, what only the time
// could call for (reaping, sweeping tombstones, the TTL refresh: see there),
// which the general path does when it is due. Here it runs only when fast()
// says that nothing is due (its condition gets "and fast()" in both
// variants, after a clock()); so it is compared whenever it leaves nothing
// undone, and TestFastPathsMatchGeneralPaths (where nothing ever comes due)
// covers it as built.
//
// Each fast path counts the calls it answers (a HINCRBY on KEYS[1] ..
// ':cov', inserted before its return; not a key the comparison reads), and
// the test requires a minimum of each, so that it cannot pass without
// comparing them; and a minimum of each thing the time does (a lease reaped,
// a waiter dropped, a tombstone swept, a TTL refresh).
func TestFastPathsMatchGeneralPathsOverTime(t *testing.T) {
	built, without := overTimeScripts(t)
	db := redistest.Connect(t)
	ctx := context.Background()
	cfg := Config{Lease: time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 300 * time.Millisecond}), WaiterTTL: 3 * time.Second, TombstoneTTL: 500 * time.Millisecond}
	var sems [2]*Semaphore
	for i := range sems {
		sems[i] = New(db.Client, db.Prefix+"sem"+strconv.Itoa(i), 3, cfg)
		t.Cleanup(func() { sems[i].Close() })
	}
	keyTTL := sems[0].keyTTL // ms
	scripts := [2][3]*redisscript.Script{built, without}

	// Hand-off messages, on both semaphores' channels (the channel is
	// prefix + the waiter's notify id; the test uses "p0" and "p1").
	ps := db.Client.PSubscribe(ctx, sems[0].prefix+"*", sems[1].prefix+"*")
	defer ps.Close()
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// messages returns the messages published on each semaphore's channels
	// since the last call, as "<notify id> <payload>": it publishes a marker
	// on each and reads up to both (a subscriber gets the messages in the
	// order they were published).
	messages := func(step int) [2][]string {
		var got [2][]string
		mark := "sync-" + strconv.Itoa(step)
		for _, s := range sems {
			db.Client.Publish(ctx, s.prefix+"sync", mark)
		}
		for seen := 0; seen < 2; {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := ps.ReceiveMessage(rctx)
			cancel()
			if err != nil {
				t.Fatalf("step %d: waiting for the published messages: %v", step, err)
			}
			for i, s := range sems {
				if id, ok := strings.CutPrefix(m.Channel, s.prefix); ok {
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

	// The scripts' time, in µs, the same for both.
	now := int64(1_795_978_983_896_001)

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
	fences, weights := map[string]int64{}, map[string]int64{} // as the Permits know them
	var prev [2]semState
	var reaped, dropped, swept, refreshed int
	for step := range 3000 {
		// The time moves on: mostly by a few ms, sometimes by up to a lease
		// or a heartbeat, rarely past a key TTL refresh (keyTTL / 4).
		switch r := next(100); {
		case r < 85:
			now += next(30_000)
		case r < 98:
			now += next(1_500_000)
		default:
			now += keyTTL/4*1000 + next(1_000_000)
		}
		// Every key's TTL is set to a mark above the key TTL, so that after
		// the step a TTL at most the key TTL tells a key the step gave one.
		if _, err := db.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, s := range sems {
				p.HSet(ctx, s.keys[0]+":clock", "s", now/1e6, "us", now%1e6)
				for _, k := range s.keys {
					p.PExpire(ctx, k, 10*time.Duration(keyTTL)*time.Millisecond)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		var desc string
		var got [2][]int64
		op := next(20)
		switch {
		case op < 2: // damage, the same on both
			var do func(s *Semaphore)
			switch next(5) {
			case 0:
				// he above the earliest lease: S says no lease expires
				// before it (a corrupt bound).
				he := now/1000 + next(3000)
				desc = "HSET :s he " + strconv.FormatInt(he, 10)
				do = func(s *Semaphore) { db.Client.HSet(ctx, s.keys[0], "he", he) }
			case 1, 2:
				k := 1 + next(5)
				desc = "DEL " + sems[0].keys[k]
				do = func(s *Semaphore) { db.Client.Del(ctx, s.keys[k]) }
			default:
				f := []string{"fence", "nq", "tn", "he", "ta", "seq", "used", "limit"}[next(8)]
				desc = "HDEL :s " + f
				do = func(s *Semaphore) { db.Client.HDel(ctx, s.keys[0], f) }
			}
			for _, s := range sems {
				do(s)
			}
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
				args = []any{1 + next(2), cfg.Lease.Milliseconds(), b2i(queue), cfg.WaiterTTL.Milliseconds(), "p" + strconv.FormatInt(next(2), 10)}
			case op < 16: // release: a holder's, a waiter's, anyone's
				sc = 1
				tok = pick(1)
				if next(8) == 0 {
					tok = pick(2)
				}
				var w int64 // the weight a Permit knows, or 0 (unknown)
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
			case op < 20: // renew, re-adopt or carry
				sc = 2
				tok = pick(1)
				w, err := db.Client.HGet(ctx, sems[0].keys[4], "w:"+tok).Int64()
				if err != nil {
					w = 1 + next(2)
				}
				args = []any{w, cfg.Lease.Milliseconds(), fences[tok], next(3)}
			}
			desc = fmt.Sprintf("%s(%q, %v)", []string{"acquire", "release", "renew"}[sc], tok, args)
			for i, s := range sems {
				v, err := s.eval(ctx, scripts[i][sc], tok, args...)
				if err != nil {
					t.Fatalf("step %d: %s: %v", step, desc, err)
				}
				got[i] = v
			}
			if !slices.Equal(got[0], got[1]) {
				t.Fatalf("step %d: %s = %v with fast paths, %v without", step, desc, got[0], got[1])
			}
			if sc == 0 && got[0][0] == stGranted {
				fences[tok] = got[0][1]
			}
			if sc == 0 && (got[0][0] == stGranted || got[0][0] == stQueued) {
				weights[tok] = args[0].(int64)
			}
			if sc == 1 && tok != "" && (args[2] == 1 || got[0][0] != 1) {
				gens[slotOf(tok)]++ // tombstoned: its slot takes a new token
			}
		}

		var st [2]semState
		for i, s := range sems {
			st[i] = readState(t, db.Client, s, keyTTL)
		}
		if d := st[0].diff(st[1]); d != "" {
			t.Fatalf("step %d: after %s: %s\nwith fast paths: %+v\nwithout: %+v", step, desc, d, st[0], st[1])
		}
		for _, k := range sems[0].keys {
			if ttl := st[0].ttl[k[strings.LastIndexByte(k, ':'):]]; ttl == "none" {
				t.Fatalf("step %d: after %s: %s has no TTL", step, desc, k)
			}
		}
		if m := messages(step); !slices.Equal(m[0], m[1]) {
			t.Fatalf("step %d: after %s: published %q with fast paths, %q without", step, desc, m[0], m[1])
		}
		// What the time did in this step (seen on calls only, not damage).
		if op >= 2 {
			p, c := prev[0], st[0]
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

	covered := map[string]int64{}
	for i, s := range sems {
		c, err := db.Client.HGetAll(ctx, s.keys[0]+":cov").Result()
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range c {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i == 1 {
				t.Errorf("fast path %s taken %d times with the fast paths disabled", name, n)
			}
			covered[name] = n
		}
	}
	t.Logf("fast paths taken: %v; leases reaped %d, waiters dropped %d, tombstones swept %d, TTL refreshes %d", covered, reaped, dropped, swept, refreshed)
	for _, f := range fastReturns {
		if covered[f.name] < 30 {
			t.Errorf("fast path %s taken %d times, want at least 30", f.name, covered[f.name])
		}
	}
	for what, n := range map[string]int{"leases reaped": reaped, "waiters dropped": dropped, "tombstones swept": swept, "TTL refreshes": refreshed} {
		if n < 10 {
			t.Errorf("%s: %d, want at least 10 (the time must matter)", what, n)
		}
	}
}

// overTimeScripts returns the scripts (acquire, release, renew) of
// TestFastPathsMatchGeneralPathsOverTime: as built, and with the fast paths
// disabled; both with the test's clock and the coverage counters, and with
// release.lua's first fast path only when fast().
func overTimeScripts(t *testing.T) (built, without [3]*redisscript.Script) {
	t.Helper()
	replace := func(src, from, to string) string {
		t.Helper()
		if n := strings.Count(src, from); n != 1 {
			t.Fatalf("%q occurs %d times in a script, want once", from, n)
		}
		return strings.Replace(src, from, to, 1)
	}
	for i, sc := range []*redisscript.Script{acquireScript, releaseScript, renewScript} {
		src := replace(assembleSource(sc), "local tm = redis.call('TIME')", "local tm = redis.call('HMGET', KEYS[1] .. ':clock', 's', 'us')")
		for _, f := range fastReturns {
			if f.script == sc {
				src = replace(src, f.ret, "redis.call('HINCRBY', KEYS[1] .. ':cov', '"+f.name+"', 1) "+f.ret)
			}
		}
		if sc == releaseScript {
			src = replace(src, "if settled and he0 ~= -1 and", "if settled and not clock() and fast() and he0 ~= -1 and")
		}
		built[i] = redisscript.New(src)
		without[i] = redisscript.New(replace(src, "local whole = limit0", "local whole = false and limit0"))
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
		if hs[i] != nil {
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
