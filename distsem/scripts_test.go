package distsem

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestScriptsLoad loads every script with SCRIPT LOAD, so a syntax error fails
// here, and checks that the digest go-redis uses is the one Redis computes.
func TestScriptsLoad(t *testing.T) {
	db := redistest.Connect(t)
	for name, sc := range map[string]*redisscript.Script{"acquire": acquireScript, "renew": renewScript, "release": releaseScript} {
		sha, err := sc.Load(t.Context(), db.Client).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", name, err)
		}
		if sha != sc.Hash() {
			t.Errorf("SCRIPT LOAD %s = %s, want %s", name, sha, sc.Hash())
		}
	}
}

// raw calls the scripts directly, the way a Semaphore does, so their contracts
// can be table-tested.
type raw struct {
	t *testing.T
	s *Semaphore
}

func newRaw(t *testing.T, limit int64) (*raw, *redistest.DB) {
	db := redistest.Connect(t)
	s := New(db.Client, db.Prefix+"sem", limit, Config{Lease: time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 200 * time.Millisecond}), WaiterTTL: 600 * time.Millisecond, TombstoneTTL: time.Second})
	t.Cleanup(func() { s.Close() })
	return &raw{t: t, s: s}, db
}

func (r *raw) acquire(tok string, w int64, queue bool) []int64 {
	r.t.Helper()
	s := r.s
	v, err := s.eval(context.Background(), acquireScript, tok, w, s.cfg.Lease.Milliseconds(), b2i(queue), s.cfg.WaiterTTL.Milliseconds(), s.id)
	if err != nil {
		r.t.Fatalf("acquire(%s, %d): %v", tok, w, err)
	}
	return v
}

// release releases tok as a cleanup does (always leaving a tombstone).
func (r *raw) release(tok string) []int64 {
	r.t.Helper()
	s := r.s
	v, err := s.eval(context.Background(), releaseScript, tok, s.cfg.TombstoneTTL.Milliseconds(), 0, 1, 0)
	if err != nil {
		r.t.Fatalf("release(%s): %v", tok, err)
	}
	return v
}

func (r *raw) renew(tok string, w, fence int64, readopt bool) []int64 {
	r.t.Helper()
	return r.renewMode(tok, w, fence, b2i(readopt))
}

// carry is the carry call of a FailLocal permit (renew.lua, mode carryArg).
func (r *raw) carry(tok string, w int64) []int64 {
	r.t.Helper()
	return r.renewMode(tok, w, 0, carryArg)
}

func (r *raw) renewMode(tok string, w, fence int64, mode int) []int64 {
	r.t.Helper()
	s := r.s
	v, err := s.eval(context.Background(), renewScript, tok, w, s.cfg.Lease.Milliseconds(), fence, mode)
	if err != nil {
		r.t.Fatalf("renew(%s): %v", tok, err)
	}
	return v
}

func (r *raw) used() int64 {
	r.t.Helper()
	st, err := r.s.Stats(context.Background())
	if err != nil {
		r.t.Fatalf("Stats: %v", err)
	}
	return st.InUse
}

func TestAcquireScriptIdempotentPerToken(t *testing.T) {
	r, _ := newRaw(t, 5)
	first := r.acquire("a", 2, false)
	if first[0] != stGranted || first[1] <= 0 {
		t.Fatalf("acquire(a) = %v, want granted with a fence", first)
	}
	again := r.acquire("a", 2, false)
	if again[0] != stGranted || again[1] != first[1] {
		t.Fatalf("repeated acquire(a) = %v, want granted with fence %d", again, first[1])
	}
	if got := r.used(); got != 2 {
		t.Fatalf("used after two acquires of one token = %d, want 2", got)
	}
	// A fence is a µs timestamp (> 1e15): it must survive as an integer.
	if first[1] < 1_000_000_000_000_000 {
		t.Errorf("fence = %d, want ≥ 1e15 (µs since epoch)", first[1])
	}
	b := r.acquire("b", 1, false)
	if b[1] <= first[1] {
		t.Errorf("fence of a later grant = %d, want > %d", b[1], first[1])
	}
}

func TestReleaseScriptNeverFreesExtraCapacity(t *testing.T) {
	r, _ := newRaw(t, 3)
	r.acquire("a", 2, false)
	r.acquire("b", 1, false)
	if got := r.release("a"); got[0] != 1 || got[2] != 1 {
		t.Fatalf("release(a) = %v, want was=1 used=1", got)
	}
	if got := r.release("a"); got[0] != 0 || got[2] != 1 {
		t.Fatalf("second release(a) = %v, want was=0 used=1", got)
	}
	if got := r.release("nobody"); got[0] != 0 || got[2] != 1 {
		t.Fatalf("release(unknown) = %v, want was=0 used=1", got)
	}
	// Capacity is exactly limit - used: weight 3 must not fit.
	if got := r.acquire("c", 3, false); got[0] != stBusy {
		t.Fatalf("acquire(c, 3) with 1 held of 3 = %v, want busy", got)
	}
	if got := r.acquire("d", 2, false); got[0] != stGranted {
		t.Fatalf("acquire(d, 2) = %v, want granted", got)
	}
}

func TestReleaseAfterExpiryFreesNothingExtra(t *testing.T) {
	r, _ := newRaw(t, 2)
	r.acquire("a", 2, false)
	time.Sleep(r.s.cfg.Lease + 100*time.Millisecond)
	// a expired; b takes the capacity; a's late release must not free b's.
	if got := r.acquire("b", 2, false); got[0] != stGranted {
		t.Fatalf("acquire(b) after a expired = %v, want granted", got)
	}
	if got := r.release("a"); got[0] != 0 || got[2] != 2 {
		t.Fatalf("release(a) after expiry = %v, want was=0 used=2", got)
	}
	if got := r.acquire("c", 1, false); got[0] != stBusy {
		t.Fatalf("acquire(c) = %v, want busy", got)
	}
}

func TestReleaseOfHeldTokenTombstonesOnlyWhenAsked(t *testing.T) {
	r, db := newRaw(t, 2)
	s := r.s
	r.acquire("a", 1, false)
	r.acquire("b", 1, false)
	for _, tc := range []struct {
		tok    string
		always int
		want   bool
	}{{"a", 0, false}, {"b", 1, true}, {"never-held", 0, true}} {
		if _, err := s.eval(context.Background(), releaseScript, tc.tok, 1000, 0, tc.always, 0); err != nil {
			t.Fatal(err)
		}
		_, err := db.Client.ZScore(t.Context(), s.keys[5], tc.tok).Result()
		if got := err == nil; got != tc.want {
			t.Errorf("release(%s, always=%d): tombstone = %v, want %v", tc.tok, tc.always, got, tc.want)
		}
	}
}

func TestTombstoneRefusesLateAcquire(t *testing.T) {
	r, _ := newRaw(t, 2)
	r.release("late") // the cleanup of a timed-out acquire arrives first
	if got := r.acquire("late", 1, true); got[0] != stTomb {
		t.Fatalf("acquire after its release = %v, want tombstoned (-1)", got)
	}
	if got := r.used(); got != 0 {
		t.Fatalf("used = %d, want 0", got)
	}
}

func TestWeightAboveStoredLimit(t *testing.T) {
	r, _ := newRaw(t, 5)
	r.acquire("a", 1, false) // stores limit 5
	other := New(r.s.client, r.s.name, 10, r.s.cfg)
	defer other.Close()
	v, err := other.eval(context.Background(), acquireScript, "b", 7, 1000, 1, 600, other.id)
	if err != nil || v[0] != stTooHeavy || v[2] != 5 {
		t.Fatalf("acquire(b, 7) with stored limit 5 = %v, %v; want too heavy, limit 5", v, err)
	}
}

func TestHandOffGrantsHeadAndPublishesToItsProcess(t *testing.T) {
	r, db := newRaw(t, 3)
	ctx := t.Context()
	ps := db.Client.Subscribe(ctx, r.s.chanPrefix+r.s.id)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // subscription confirmation
		t.Fatal(err)
	}
	r.acquire("h", 2, true) // 1 of 3 left
	if got := r.acquire("w1", 2, true); got[0] != stQueued || got[4] != 0 {
		t.Fatalf("acquire(w1, 2) = %v, want queued at 0", got)
	}
	// 1 is free, but w1 is ahead: a lighter caller never overtakes the queue.
	if got := r.acquire("w2", 1, true); got[0] != stQueued || got[4] != 1 {
		t.Fatalf("acquire(w2, 1) = %v, want queued at 1 (no barging)", got)
	}
	if got := r.acquire("x", 1, false); got[0] != stBusy {
		t.Fatalf("try acquire(x, 1) with waiters queued = %v, want busy", got)
	}
	r.release("h")
	// Both waiters fit now: granted in order, each told its fence.
	for _, w := range []struct {
		tok    string
		weight int64
	}{{"w1", 2}, {"w2", 1}} {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil || !strings.HasPrefix(m.Payload, w.tok+":") {
			t.Fatalf("notification = %v, %v; want %s:<fence>", m, err, w.tok)
		}
		// A repeated acquire (a heartbeat that crossed the message) returns
		// the fence the message carried.
		if got := r.acquire(w.tok, w.weight, true); got[0] != stGranted || w.tok+":"+strconv.FormatInt(got[1], 10) != m.Payload {
			t.Fatalf("acquire of granted %s = %v, want granted with the fence of %q", w.tok, got, m.Payload)
		}
	}
	if got := r.used(); got != 3 {
		t.Fatalf("used = %d, want 3", got)
	}
}

func TestDeadWaiterIsReaped(t *testing.T) {
	r, db := newRaw(t, 1)
	r.acquire("h", 1, true)
	r.acquire("dead", 1, true)
	time.Sleep(r.s.cfg.WaiterTTL + 100*time.Millisecond)
	r.release("h")
	// The dead waiter's heartbeat expired: it is reaped, not granted.
	if got := r.acquire("n", 1, false); got[0] != stGranted {
		t.Fatalf("acquire(n) after the only waiter died = %v, want granted", got)
	}
	if n, _ := db.Client.ZCard(t.Context(), r.s.keys[2]).Result(); n != 0 {
		t.Fatalf("queue length = %d, want 0", n)
	}
}

func TestRenewScript(t *testing.T) {
	r, db := newRaw(t, 2)
	g := r.acquire("a", 1, false)
	if got := r.renew("a", 1, g[1], false); got[0] != stRenewed {
		t.Fatalf("renew(a) = %v, want renewed", got)
	}
	if err := db.Client.Del(t.Context(), r.s.keys...).Err(); err != nil { // data loss
		t.Fatal(err)
	}
	if got := r.renew("a", 1, g[1], false); got[0] != stLost {
		t.Fatalf("renew(a) after data loss = %v, want lost", got)
	}
	if got := r.renew("a", 1, g[1], true); got[0] != stReadopted || got[2] != 1 {
		t.Fatalf("renew(a, readopt) after data loss = %v, want re-adopted, used 1", got)
	}
	if f, _ := db.Client.HGet(t.Context(), r.s.keys[4], "f:a").Result(); f != "" && strings.ContainsAny(f, "e.") {
		t.Fatalf("stored fence %q is not an integer", f)
	}
	r.release("a")
	if got := r.renew("a", 1, g[1], true); got[0] != stLost {
		t.Fatalf("renew(a, readopt) after release = %v, want lost (tombstoned)", got)
	}
}

// TestCarryScript: a carry call counts a missing token whatever the
// capacity and the queue (its weight is in use already), before the queue is
// served, so no waiter is handed that weight; a tombstoned token is not
// carried; a carried token renews and releases like any holder.
func TestCarryScript(t *testing.T) {
	r, _ := newRaw(t, 2)
	r.acquire("a", 2, false)
	if got := r.acquire("w", 1, true); got[0] != stQueued {
		t.Fatalf("acquire(w) with the limit held = %v, want queued", got)
	}
	if got := r.carry("c", 1); got[0] != stReadopted || got[2] != 3 {
		t.Fatalf("carry(c) over a full limit and a waiter = %v, want carried, used 3", got)
	}
	r.release("a")
	if got := r.used(); got != 2 {
		t.Fatalf("used after a's release = %d, want 2 (c, and the waiter handed the 1 left)", got)
	}
	if got := r.renew("c", 1, 0, false); got[0] != stRenewed {
		t.Fatalf("renew(c) once carried = %v, want renewed", got)
	}
	r.release("c")
	if got := r.carry("c", 1); got[0] != stLost {
		t.Fatalf("carry(c) after its release = %v, want lost (tombstoned)", got)
	}
}

func TestEveryKeyHasTTL(t *testing.T) {
	r, db := newRaw(t, 1)
	r.acquire("h", 1, true)
	r.acquire("w", 1, true)
	r.release("x")
	for _, k := range r.s.keys {
		ttl, err := db.Client.PTTL(t.Context(), k).Result()
		if err != nil || ttl <= 0 {
			t.Errorf("PTTL %s = %v, %v; want a TTL", k, ttl, err)
		}
	}
}

// ttlsOK checks that every existing key of the semaphore has a TTL.
func ttlsOK(t *testing.T, db *redistest.DB, s *Semaphore, step string) {
	t.Helper()
	for _, k := range s.keys {
		if n, _ := db.Client.Exists(t.Context(), k).Result(); n == 0 {
			continue
		}
		ttl, err := db.Client.PTTL(t.Context(), k).Result()
		if err != nil || ttl <= 0 {
			t.Errorf("after %s: PTTL %s = %v, %v; want a TTL", step, k, ttl, err)
		}
	}
}

// The scripts refresh every key's TTL only every key TTL / 4; a key created
// (or emptied and created again) in between must get its own TTL at once.
func TestKeyCreatedBetweenRefreshesHasTTL(t *testing.T) {
	r, db := newRaw(t, 1)
	s, ctx := r.s, t.Context()
	g := r.acquire("a", 1, true) // new state: every key is refreshed
	ttlsOK(t, db, s, "acquire(a)")
	ta := readS(t, db.Client, s.keys[0])["ta"]
	if ta == "" {
		t.Fatal("no ta in the state")
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"release(a)", func() { r.release("a") }},              // empties :h (:d is kept), creates :t
		{"acquire(b)", func() { g = r.acquire("b", 1, true) }}, // creates :h again
		{"acquire(c)", func() { r.acquire("c", 1, true) }},     // creates :q and :qe
		{"lose :h and :d, renew(b, readopt)", func() {
			db.Client.Del(ctx, s.keys[1], s.keys[4])
			if got := r.renew("b", 1, g[1], true); got[0] != stReadopted {
				t.Fatalf("renew(b, readopt) = %v, want re-adopted", got)
			}
		}},
	}
	for _, st := range steps {
		st.do()
		ttlsOK(t, db, s, st.name)
	}
	if got := readS(t, db.Client, s.keys[0])["ta"]; got != ta {
		t.Fatalf("ta = %s, want %s: the steps must run between refreshes", got, ta)
	}
	// An old refresh gives every key a fresh TTL again.
	setS(t, db.Client, s.keys[0], "ta", 1)
	for _, k := range s.keys {
		db.Client.PExpire(ctx, k, time.Second)
	}
	r.acquire("c", 1, true) // heartbeat
	for _, k := range s.keys {
		if ttl, _ := db.Client.PTTL(ctx, k).Result(); ttl > 0 && ttl <= time.Second {
			t.Errorf("PTTL %s = %v after a refresh, want the key TTL", k, ttl)
		}
	}
}

// Lost state (the :s hash) is rebuilt from the keys: the queue still blocks
// barging and tombstones still refuse.
func TestStateLossKeepsQueueAndTombstones(t *testing.T) {
	r, db := newRaw(t, 2)
	s, ctx := r.s, t.Context()
	r.acquire("h", 1, true)
	if got := r.acquire("w", 2, true); got[0] != stQueued {
		t.Fatalf("acquire(w, 2) = %v, want queued", got)
	}
	r.release("late")
	db.Client.Del(ctx, s.keys[0])
	if got := r.acquire("x", 1, false); got[0] != stBusy {
		t.Fatalf("try acquire(x, 1) after state loss with a waiter queued = %v, want busy", got)
	}
	db.Client.Del(ctx, s.keys[0])
	if got := r.acquire("late", 1, true); got[0] != stTomb {
		t.Fatalf("acquire(late) after state loss = %v, want tombstoned", got)
	}
	if got := r.used(); got != 1 {
		t.Fatalf("used = %d, want 1", got)
	}
	r.release("h") // hands off to w
	if got := r.acquire("w", 2, true); got[0] != stGranted {
		t.Fatalf("acquire(w) after release(h) = %v, want granted", got)
	}
}

// A waiter queued after the state (the :s hash) was lost queues behind the
// waiters left, and its reply says so: the lost last queue number is taken
// from the queue, not started again at 1.
func TestStateLossQueuesBehindWaitersLeft(t *testing.T) {
	r, db := newRaw(t, 1)
	s, ctx := r.s, t.Context()
	r.acquire("h", 1, true)
	for i, w := range []string{"w1", "w2"} {
		if got := r.acquire(w, 1, true); got[0] != stQueued || got[4] != int64(i) {
			t.Fatalf("acquire(%s) = %v, want queued at %d", w, got, i)
		}
	}
	db.Client.Del(ctx, s.keys[0])
	if got := r.acquire("w3", 1, true); got[0] != stQueued || got[4] != 2 {
		t.Fatalf("acquire(w3) after state loss = %v, want queued at 2", got)
	}
	if q, _ := db.Client.ZRange(ctx, s.keys[2], 0, -1).Result(); !slices.Equal(q, []string{"w1", "w2", "w3"}) {
		t.Fatalf("queue after state loss = %v, want [w1 w2 w3]", q)
	}
}

// Weight counted in the state but held by nobody (the holders' keys were lost)
// is healed before any capacity decision, although the scripts skip reading
// the holders while no lease can have expired.
func TestUsedWithoutHoldersIsHealed(t *testing.T) {
	r, db := newRaw(t, 1)
	s := r.s
	r.acquire("a", 1, false)
	db.Client.Del(t.Context(), s.keys[1], s.keys[4])
	if got := r.acquire("b", 1, false); got[0] != stGranted || got[3] != 1 {
		t.Fatalf("acquire(b) after the holders were lost = %v, want granted, used 1", got)
	}
	ttlsOK(t, db, s, "acquire(b)")
	db.Client.Del(t.Context(), s.keys[1], s.keys[4])
	if got := r.acquire("c", 1, true); got[0] != stGranted {
		t.Fatalf("acquire(c) after the holders were lost = %v, want granted", got)
	}
}

// assembleSource returns the Lua source of one of the three scripts.
func assembleSource(sc *redisscript.Script) string {
	switch sc {
	case acquireScript:
		return acquireSource
	case renewScript:
		return renewSource
	case releaseScript:
		return releaseSource
	}
	panic("unknown script")
}

// withoutFastPaths returns src, an assembled script, with its fast paths off
// (whole set false before settled is derived from it, see head.lua), and
// fails tb if src has no such line.
func withoutFastPaths(tb testing.TB, src string) string {
	tb.Helper()
	const line = "\nlocal settled = whole and "
	if strings.Count(src, line) != 1 {
		tb.Fatal("no fast flag to disable")
	}
	return strings.Replace(src, line, "\nwhole = false"+line, 1)
}

// TestFastPathsMatchGeneralPaths runs one random sequence of calls against two
// semaphores, one with the scripts as built and one with their fast paths
// disabled, and checks that both answer and store the same (fences and times
// aside).
func TestFastPathsMatchGeneralPaths(t *testing.T) {
	slow := func(sc *redisscript.Script) *redisscript.Script {
		return redisscript.NewPacked(withoutFastPaths(t, assembleSource(sc)))
	}
	built := [3]*redisscript.Script{acquireScript, releaseScript, renewScript}
	without := [3]*redisscript.Script{slow(acquireScript), slow(releaseScript), slow(renewScript)}
	for _, queue := range []bool{false, true} {
		matchScripts(t, queue, func(int) [2][3]*redisscript.Script { return [2][3]*redisscript.Script{built, without} })
	}
}

// The scripts of commit e078012, before the hand-off and queueing calls were
// cut, with the same key layout.
var (
	//go:embed testdata/scripts-e078012/head.lua
	oldHeadLua string
	//go:embed testdata/scripts-e078012/common.lua
	oldCommonLua string
	//go:embed testdata/scripts-e078012/acquire.lua
	oldAcquireLua string
	//go:embed testdata/scripts-e078012/release.lua
	oldReleaseLua string
	//go:embed testdata/scripts-e078012/renew.lua
	oldRenewLua string
)

// TestScriptsShareStateWithPreviousVersion: during a rolling deploy, processes
// running the previous scripts (e078012) and these share one semaphore's keys.
// One random sequence of calls runs against two semaphores: one with these
// scripts only, one with each call made by the previous scripts or these at
// random. Both must answer and store the same, so either version reads what
// the other wrote, and a mixed fleet behaves as one of either. These scripts
// write the state as text here: the previous scripts read only text (a deploy
// from them goes through a version that writes text: see
// TestFormatsShareState).
func TestScriptsShareStateWithPreviousVersion(t *testing.T) {
	oldAssemble := previous(oldHeadLua, oldCommonLua)
	cur := formatScripts(t, false)
	old := [3]*redisscript.Script{oldAssemble(oldAcquireLua), oldAssemble(oldReleaseLua), oldAssemble(oldRenewLua)}
	if old[0].Hash() == cur[0].Hash() || old[1].Hash() == cur[1].Hash() {
		t.Fatal("the previous scripts are the current ones: nothing to compare")
	}
	for _, queue := range []bool{false, true} {
		matchScripts(t, queue, mixScripts(99, cur, old))
	}
}

// The scripts of commit 6be374c, the last to send the key TTL, the channel
// prefix and the acquire's weight and notify id as arguments of their own.
var (
	//go:embed testdata/scripts-6be374c/head.lua
	argvHeadLua string
	//go:embed testdata/scripts-6be374c/common.lua
	argvCommonLua string
	//go:embed testdata/scripts-6be374c/acquire.lua
	argvAcquireLua string
	//go:embed testdata/scripts-6be374c/release.lua
	argvReleaseLua string
	//go:embed testdata/scripts-6be374c/renew.lua
	argvRenewLua string
)

// TestScriptsShareStateWithArgvVersion: as TestScriptsShareStateWithPreviousVersion,
// for the version before the arguments moved into ARGV[2] (6be374c), which
// writes the state packed, as these scripts do: a fleet in a rolling deploy
// between the two behaves as one of either, so the move changed nothing of
// what the scripts store or answer.
func TestScriptsShareStateWithArgvVersion(t *testing.T) {
	assemble := func(script string) *redisscript.Script {
		return redisscript.NewPacked(assembleWith(argvHeadLua, argvCommonLua, script))
	}
	cur := [3]*redisscript.Script{acquireScript, releaseScript, renewScript}
	old := [3]*redisscript.Script{assemble(argvAcquireLua), assemble(argvReleaseLua), assemble(argvRenewLua)}
	for i := range old {
		if old[i].Hash() == cur[i].Hash() {
			t.Fatal("the 6be374c scripts are the current ones: nothing to compare")
		}
	}
	for _, queue := range []bool{false, true} {
		matchScripts(t, queue, mixScripts(31, cur, old))
	}
}

// previous returns a function that assembles a script of a previous version
// from its file, with that version's head.lua and common.lua (replies as
// arrays, as those versions sent them).
func previous(head, common string) func(string) *redisscript.Script {
	return func(script string) *redisscript.Script {
		return redisscript.New(assembleWith(head, common, script))
	}
}

// mixScripts returns the scripts of matchScripts's steps: all for the first
// semaphore; for the second all or other, at random (from seed).
func mixScripts(seed uint64, all, other [3]*redisscript.Script) func(int) [2][3]*redisscript.Script {
	rnd := seed
	return func(int) [2][3]*redisscript.Script {
		rnd = rnd*6364136223846793005 + 1442695040888963407
		if (rnd>>40)&1 == 0 {
			return [2][3]*redisscript.Script{all, other}
		}
		return [2][3]*redisscript.Script{all, all}
	}
}

// The scripts of commit b7c59eb, the release that reads the state packed or
// as text and writes text.
var (
	//go:embed testdata/scripts-b7c59eb/head.lua
	textHeadLua string
	//go:embed testdata/scripts-b7c59eb/common.lua
	textCommonLua string
	//go:embed testdata/scripts-b7c59eb/acquire.lua
	textAcquireLua string
	//go:embed testdata/scripts-b7c59eb/release.lua
	textReleaseLua string
	//go:embed testdata/scripts-b7c59eb/renew.lua
	textRenewLua string
)

// TestFormatsShareState: these scripts (writing the state packed) and a
// version that writes it as text (both read either) share one semaphore's
// keys, as TestScriptsShareStateWithPreviousVersion checks for the previous
// scripts: one semaphore with these scripts only, one with each call made by
// either at random, so that the state changes format back and forth. The
// text writer is b7c59eb, the release a rolling deploy from a text-only
// version goes through, and these scripts built to write text.
func TestFormatsShareState(t *testing.T) {
	b7 := previous(textHeadLua, textCommonLua)
	for _, tc := range []struct {
		name string
		text [3]*redisscript.Script
	}{
		{"b7c59eb", [3]*redisscript.Script{b7(textAcquireLua), b7(textReleaseLua), b7(textRenewLua)}},
		{"text build", formatScripts(t, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, queue := range []bool{false, true} {
				matchScripts(t, queue, mixScripts(7, [3]*redisscript.Script{acquireScript, releaseScript, renewScript}, tc.text))
			}
		})
	}
}

// matchScripts runs one random sequence of calls against two semaphores, the
// calls of step i to semaphore j with scripts(i)[j] (acquire, release, renew),
// and checks that both answer and store the same (fences and times aside).
// Acquires mostly only try, unless queue: then they wait as often, and the
// queue is rarely empty. Now and then a release only sets the limit (as
// SetLimit does), so that the stored limit differs from the configured one.
// Each semaphore's state is in one format at a time (no text field beside
// p), and its stored fence never goes back.
func matchScripts(t *testing.T, queue bool, scripts func(step int) [2][3]*redisscript.Script) {
	// Long TTLs: nothing may expire between the calls to the two.
	db := redistest.Connect(t)
	cfg := Config{Lease: time.Minute, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second}), WaiterTTL: time.Minute, TombstoneTTL: time.Minute}
	var rs [2]*raw
	for i := range rs {
		rs[i] = &raw{t: t, s: New(db.Client, db.Prefix+"sem"+strconv.Itoa(i), 3, cfg)}
		t.Cleanup(func() { rs[i].s.Close() })
	}
	ctx := context.Background()
	fences := [2]map[string]int64{{}, {}}
	rnd := uint64(12345)
	next := func(n uint64) int64 {
		rnd = rnd*6364136223846793005 + 1442695040888963407
		return int64((rnd >> 33) % n)
	}
	var gens [6]int
	var lastFence [2]int64 // the stored fence after the last step
	for step := range 600 {
		sc := scripts(step)
		// A token tombstoned by a release is not used again (as a client
		// never reuses one): its slot takes a new token.
		slot := next(6)
		op, tok, w, flag := next(3), "k"+strconv.FormatInt(slot, 10)+"."+strconv.Itoa(gens[slot]), 1+next(2), next(2)
		if op == 0 && !queue && next(3) != 0 {
			flag = 0 // mostly try: a long queue would keep the fast paths off
		}
		// The weight a release passes: the one tok holds (as a Permit knows
		// it), or 0 (unknown) one time in three.
		var held int64
		if op == 1 && next(3) != 0 {
			held, _ = db.Client.HGet(ctx, rs[0].s.keys[4], "w:"+tok).Int64()
		}
		var limit int64 // a release's new limit (SetLimit), 0 to keep it
		if op == 1 && next(25) == 0 {
			tok, held, limit = "", 0, 2+next(4)
		}
		var got [2][]int64
		for i, r := range rs {
			s := r.s
			var args []any
			switch op {
			case 0:
				args = []any{w, s.cfg.Lease.Milliseconds(), flag, s.cfg.WaiterTTL.Milliseconds(), s.id}
			case 1:
				args = []any{s.cfg.TombstoneTTL.Milliseconds(), limit, flag, held}
			case 2:
				args = []any{w, s.cfg.Lease.Milliseconds(), fences[i][tok], flag}
			}
			v, err := s.eval(ctx, sc[i][op], tok, args...)
			if err != nil {
				t.Fatalf("step %d: op %d: %v", step, op, err)
			}
			if op == 0 && v[0] == stGranted {
				fences[i][tok] = v[1]
			}
			if op == 0 {
				v[1] = 0 // fences differ
			}
			if len(v) > 5 {
				v = v[:5] // ms to the next expiry differ
			}
			got[i] = v
		}
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("step %d: op %d(%s, %d, %d) = %v on the first semaphore, %v on the second", step, op, tok, w, flag, got[0], got[1])
		}
		if op == 1 && tok != "" && (flag == 1 || got[0][0] != 1) {
			gens[slot]++
		}
		for _, k := range []int{1, 2, 3, 5} {
			a, _ := db.Client.ZRange(ctx, rs[0].s.keys[k], 0, -1).Result()
			b, _ := db.Client.ZRange(ctx, rs[1].s.keys[k], 0, -1).Result()
			if k == 3 { // QE's _: versions before it do not write it (see head.lua)
				a = slices.DeleteFunc(a, func(m string) bool { return m == "_" })
				b = slices.DeleteFunc(b, func(m string) bool { return m == "_" })
			}
			if k != 2 { // ordered by times, which differ by a ms or so
				slices.Sort(a)
				slices.Sort(b)
			}
			if !slices.Equal(a, b) {
				t.Fatalf("step %d: %s = %v on the first semaphore, %v on the second", step, rs[0].s.keys[k], a, b)
			}
		}
		sa, sb := readS(t, db.Client, rs[0].s.keys[0]), readS(t, db.Client, rs[1].s.keys[0])
		for _, f := range []string{"limit", "used", "nq", "tn"} {
			a, b := sa[f], sb[f]
			if a == "" || b == "" || a != b && !(f == "tn" && a != "-1" && b != "-1") {
				t.Fatalf("step %d: state %s = %q on the first semaphore, %q on the second", step, f, a, b)
			}
		}
		for i, st := range []map[string]string{sa, sb} {
			for f := range st {
				if strings.HasPrefix(f, "raw:") || f == "p" {
					t.Fatalf("step %d: semaphore %d holds its state in two formats: %v", step, i, st)
				}
			}
			fence, err := strconv.ParseInt(st["fence"], 10, 64)
			if err != nil || fence < lastFence[i] {
				t.Fatalf("step %d: semaphore %d's stored fence is %q, was %d", step, i, st["fence"], lastFence[i])
			}
			lastFence[i] = fence
		}
		// D's fields, but _: versions before it do not write it (see
		// head.lua).
		a, _ := db.Client.HKeys(ctx, rs[0].s.keys[4]).Result()
		b, _ := db.Client.HKeys(ctx, rs[1].s.keys[4]).Result()
		a = slices.DeleteFunc(a, func(f string) bool { return f == "_" })
		b = slices.DeleteFunc(b, func(f string) bool { return f == "_" })
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("step %d: fields of :d = %v on the first semaphore, %v on the second", step, a, b)
		}
		// And their values but the fences (times): weights and leases as
		// stored, a notify id as the semaphore's own.
		va, _ := db.Client.HGetAll(ctx, rs[0].s.keys[4]).Result()
		vb, _ := db.Client.HGetAll(ctx, rs[1].s.keys[4]).Result()
		for _, f := range a {
			x, y := va[f], vb[f]
			switch {
			case strings.HasPrefix(f, "f:"):
				continue
			case strings.HasPrefix(f, "c:"):
				x, y = strings.ReplaceAll(x, rs[0].s.id, "<id>"), strings.ReplaceAll(y, rs[1].s.id, "<id>")
			}
			if x != y {
				t.Fatalf("step %d: :d's %s = %q on the first semaphore, %q on the second", step, f, x, y)
			}
		}
		for _, r := range rs { // the mixed fleet's keys too
			ttlsOK(t, db, r.s, "step "+strconv.Itoa(step))
		}
	}
}

// Re-adoption never overtakes the queue: with a heavy waiter blocked at the
// head, a holder whose lease expired (a pause) is not put back even though its
// own weight would fit.
func TestRenewDoesNotReadoptPastQueuedWaiter(t *testing.T) {
	r, _ := newRaw(t, 3) // Lease 1s, WaiterTTL 600ms
	a := r.acquire("a", 1, false)
	b := r.acquire("b", 1, false)
	if got := r.acquire("heavy", 3, true); got[0] != stQueued {
		t.Fatalf("acquire(heavy, 3) = %v, want queued", got)
	}
	// Let a's lease run out while heavy keeps heartbeating (real time: Redis's
	// clock decides).
	for range 2 {
		time.Sleep(550 * time.Millisecond)
		if got := r.renew("b", 1, b[1], false); got[0] != stRenewed { // b stays held
			t.Fatalf("renew(b) = %v", got)
		}
		if got := r.acquire("heavy", 3, true); got[0] != stQueued {
			t.Fatalf("heartbeat of heavy = %v, want still queued", got)
		}
	}
	if got := r.renew("a", 1, a[1], true); got[0] == stReadopted {
		t.Fatalf("renew(a, readopt) with a heavy waiter queued = %v: re-adopted past the queue", got)
	}
	if got := r.used(); got != 1 {
		t.Fatalf("used = %d, want 1 (b only)", got)
	}
}

// TestFastAcquireGivesLostKeysATTL: when H and D were lost on their own (an
// eviction, a DEL) while S still counts weight in use, the fast acquire that
// recreates them gives them a TTL (an optimisation once skipped the PEXPIREs
// whenever weight was in use).
func TestFastAcquireGivesLostKeysATTL(t *testing.T) {
	r, db := newRaw(t, 2)
	r.acquire("a", 1, false)
	if err := db.Client.Del(t.Context(), r.s.keys[1], r.s.keys[4]).Err(); err != nil {
		t.Fatal(err)
	}
	if got := r.acquire("b", 1, false); got[0] != stGranted {
		t.Fatalf("acquire(b) = %v", got)
	}
	ttlsOK(t, db, r.s, "fast acquire after H and D were lost")
}

// TestKeptKeys: :d and :qe keep a marker _ (see head.lua): every write that
// may create one sets it too, so neither is ever emptied, and a call gives
// one a TTL only when its write found neither the marker nor anything else
// it wrote there. For each path that writes :d or :qe, between refreshes,
// with the fast paths and without: a key lost on its own (a DEL) is created
// again with a TTL; a key found with _ keeps the TTL it had (no PEXPIRE);
// a key written by a version before _ (none) gets _, and a TTL unless the
// write found the token in it (a heartbeat's :qe: the key existed).
func TestKeptKeys(t *testing.T) {
	slow := func(sc *redisscript.Script) *redisscript.Script {
		return redisscript.NewPacked(withoutFastPaths(t, assembleSource(sc)))
	}
	for _, fast := range []bool{true, false} {
		acq, ren := acquireScript, renewScript
		if !fast {
			acq, ren = slow(acquireScript), slow(renewScript)
		}
		try := func(r *raw, tok string, queue int) []int64 {
			return r.evalRaw(acq, tok, 1, r.s.cfg.Lease.Milliseconds(), queue, r.s.cfg.WaiterTTL.Milliseconds(), r.s.id)
		}
		const kD, kQE = 4, 3 // :d and :qe in Semaphore.keys
		for _, tc := range []struct {
			name string
			key  int          // the key under test
			prep func(r *raw) // after a's grant: leaves a semaphore of limit 2 where do writes the key
			do   func(r *raw) []int64
			want int64             // do's status
			keep func(string) bool // whether the key's TTL is kept, by the key's state before do
		}{
			{"grant", kD, func(r *raw) {}, func(r *raw) []int64 { return try(r, "b", 0) }, stGranted, nil},
			{"queue", kD, func(r *raw) { try(r, "c", 0) }, func(r *raw) []int64 { return try(r, "w", 1) }, stQueued, nil},
			{"re-adopt", kD, func(r *raw) {}, func(r *raw) []int64 {
				return r.evalRaw(ren, "gone", 1, r.s.cfg.Lease.Milliseconds(), 7, 1)
			}, stReadopted, nil},
			{"queue", kQE, func(r *raw) { try(r, "c", 0); try(r, "v", 1) }, func(r *raw) []int64 { return try(r, "w", 1) }, stQueued, nil},
			{"heartbeat", kQE, func(r *raw) { try(r, "c", 0); try(r, "w", 1) }, func(r *raw) []int64 { return try(r, "w", 1) }, stQueued,
				func(st string) bool { return st != "lost" }},
		} {
			keyName := map[int]string{kD: ":d", kQE: ":qe"}[tc.key]
			for _, st := range []string{"lost", "kept", "written before _"} {
				t.Run(fmt.Sprintf("fast=%v/%s/%s/%s", fast, keyName, tc.name, st), func(t *testing.T) {
					r, db := newRaw(t, 2)
					s, ctx := r.s, t.Context()
					// A holder a (weight 1), so that :h and :d exist; the
					// state is refreshed now, so no call below refreshes.
					if got := try(r, "a", 0); got[0] != stGranted {
						t.Fatalf("acquire(a) = %v", got)
					}
					tc.prep(r)
					k := s.keys[tc.key]
					marked := func() bool {
						if tc.key == kD {
							ok, _ := db.Client.HExists(ctx, k, "_").Result()
							return ok
						}
						return db.Client.ZScore(ctx, k, "_").Err() == nil
					}
					const mark = time.Hour + 7*time.Second // no key TTL
					switch st {
					case "lost":
						db.Client.Del(ctx, k)
					case "kept":
						if !marked() {
							t.Fatalf("%s has no _ before %s", keyName, tc.name)
						}
						db.Client.PExpire(ctx, k, mark)
					case "written before _":
						db.Client.HDel(ctx, k, "_")
						db.Client.ZRem(ctx, k, "_")
						db.Client.PExpire(ctx, k, mark)
					}
					if got := tc.do(r); got[0] != tc.want {
						t.Fatalf("%s = %v, want status %d", tc.name, got, tc.want)
					}
					ttlsOK(t, db, s, tc.name)
					if !marked() {
						t.Errorf("after %s: %s has no _", tc.name, keyName)
					}
					want := st == "kept"
					if tc.keep != nil {
						want = tc.keep(st)
					}
					ttl, _ := db.Client.PTTL(ctx, k).Result()
					if kept := ttl > time.Hour; kept != want {
						t.Errorf("after %s on a %s %s: PTTL %v; want the TTL kept: %v", tc.name, keyName, st, ttl, want)
					}
				})
			}
		}
	}
}

// evalRaw runs sc (one of the three scripts, or a variant) with tok and the
// script's own ARGV.
func (r *raw) evalRaw(sc *redisscript.Script, tok string, extra ...any) []int64 {
	r.t.Helper()
	v, err := r.s.eval(context.Background(), sc, tok, extra...)
	if err != nil {
		r.t.Fatalf("%s: %v", tok, err)
	}
	return v
}
