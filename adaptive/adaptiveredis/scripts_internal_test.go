package adaptiveredis

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/internal/limitctl"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// quietGate returns a Gate on rdb whose flusher never fires: the test makes
// its calls itself.
func quietGate(t *testing.T, rdb redis.UniversalClient, name string, cfg Config) *Gate {
	t.Helper()
	cfg.FlushInterval = time.Hour
	g := New(rdb, name, cfg)
	t.Cleanup(func() { g.Close() })
	return g
}

// flushOnce sends one flush with the given samples for round and returns
// the parsed reply.
func flushOnce(t *testing.T, g *Gate, round, samples int64, lat time.Duration, ver int64) flushReply {
	t.Helper()
	vals, err := g.run(flushScript, g.id, round, samples, int64(lat), "0", 0, 0, ver, g.keyTTL)
	if err != nil {
		t.Fatalf("flush: %v", err)
	}
	r, err := parseFlush(vals)
	if err != nil {
		t.Fatalf("flush reply: %v", err)
	}
	return r
}

// TestFlushAndCloseScripts: a fleet without state answers version 0; the
// first close writes the state, which the next flush returns as written
// (JSON round trip); samples of the current round are added, those of a
// round already closed are discarded, and each reporting process is
// counted once per round; a close on a stale version changes nothing.
func TestFlushAndCloseScripts(t *testing.T) {
	db := redistest.Connect(t)
	name := db.Key("scripts")
	g := quietGate(t, db.Client, name, Config{Initial: 4, Max: 50})
	other := quietGate(t, db.Client, name, Config{Initial: 4, Max: 50})

	r := flushOnce(t, g, 0, 0, 0, 0)
	if r.ver != 0 || r.state != "" {
		t.Fatalf("flush of a new fleet: ver %d state %q, want 0 and none", r.ver, r.state)
	}
	st := limitctl.New(g.p, 4, redisTime(r.now))
	st.Baseline, st.Latency, st.BaseSE = 7.25e6, 8.5e6, 0.0125
	st.Hist[0] = limitctl.Point{Base: 4, Limit: 4, Latency: 8.5e6}
	st.NHist = 1
	if !g.write(0, st, true, 0) {
		t.Fatalf("first close lost")
	}
	r = flushOnce(t, g, 0, 0, 0, 0)
	if r.ver != 1 || r.round != 1 {
		t.Fatalf("after the first close: ver %d round %d, want 1 and 1", r.ver, r.round)
	}
	var got limitctl.State
	if err := json.Unmarshal([]byte(r.state), &got); err != nil {
		t.Fatalf("state in Redis: %v", err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("state round trip:\n got %+v\nwant %+v", got, st)
	}
	if again := flushOnce(t, g, 1, 0, 0, 1); again.state != "" {
		t.Errorf("flush at the known version returned the state again")
	}
	// The flush reads the semaphore's limit and weight in use (distsem's
	// {name}:s fields limit and used).
	h, err := g.Hold(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := flushOnce(t, g, 1, 0, 0, 1); r.semLimit != 4 || r.semUsed != 1 || r.maxIn != 1 {
		t.Errorf("semaphore seen by the flush: limit %d, used %d, round's max %d; want 4, 1, 1", r.semLimit, r.semUsed, r.maxIn)
	}
	// The same from the text fields a distsem writing text (b7c59eb) leaves
	// instead of the packed p.
	ctx := context.Background()
	if n, err := db.Client.HDel(ctx, g.keys[2], "p").Result(); err != nil || n != 1 {
		t.Fatalf("HDEL %s p = %d, %v: want the packed state there", g.keys[2], n, err)
	}
	if err := db.Client.HSet(ctx, g.keys[2], "limit", 4, "used", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if r := flushOnce(t, g, 1, 0, 0, 1); r.semLimit != 4 || r.semUsed != 1 {
		t.Errorf("text state seen by the flush: limit %d, used %d; want 4, 1", r.semLimit, r.semUsed)
	}
	h.Release()

	flushOnce(t, g, 1, 10, 100*time.Millisecond, 1)
	r = flushOnce(t, other, 1, 5, 50*time.Millisecond, 1)
	if r.samples != 15 || r.lat != int64(150*time.Millisecond) || r.added != 1 {
		t.Errorf("round 1 totals: %d samples, %d ns, added %d; want 15, %d, 1", r.samples, r.lat, r.added, int64(150*time.Millisecond))
	}
	if r.np != 2 {
		t.Errorf("round 1 reporters: %d, want 2 (each counted once)", r.np)
	}

	// Close round 1 (open round 2, 5ms later); a close on version 1 again loses.
	if !g.write(1, st, true, 5*time.Millisecond) {
		t.Fatalf("close of round 1 lost")
	}
	if other.write(1, st, true, 0) {
		t.Fatalf("a second close on the same version won")
	}
	r = flushOnce(t, other, 1, 7, 70*time.Millisecond, 1)
	if r.round != 2 || r.added != 0 || r.samples != 0 {
		t.Errorf("samples of closed round 1 after the close: round %d added %d samples %d; want 2, 0, 0", r.round, r.added, r.samples)
	}
	if r.lp != 2 || r.np != 1 {
		t.Errorf("reporters after the close: last round %d, this round %d; want 2 and 1", r.lp, r.np)
	}
	if r.start < r.now-int64(time.Second/time.Microsecond) || r.start > r.now+int64(time.Second/time.Microsecond) {
		t.Errorf("round 2 start %d µs far from Redis time %d µs", r.start, r.now)
	}
	r = flushOnce(t, other, 2, 3, 30*time.Millisecond, 2)
	if r.samples != 3 || r.added != 1 {
		t.Errorf("round 2 totals: %d samples, added %d; want 3, 1", r.samples, r.added)
	}
	// A pooled decision keeps the round and its totals.
	if !g.write(2, st, false, 0) {
		t.Fatalf("pooled close lost")
	}
	r = flushOnce(t, g, 2, 1, 10*time.Millisecond, 3)
	if r.ver != 3 || r.round != 2 || r.samples != 4 {
		t.Errorf("after a pooled close: ver %d round %d samples %d; want 3, 2, 4", r.ver, r.round, r.samples)
	}
}

// TestOneCloserWins: of several processes closing the same round at once,
// exactly one writes its decision.
func TestOneCloserWins(t *testing.T) {
	db := redistest.Connect(t)
	name := db.Key("race")
	const n = 8
	gates := make([]*Gate, n)
	for i := range gates {
		c := redis.NewClient(redistest.Options(db.Client.Options().Addr))
		t.Cleanup(func() { c.Close() })
		if err := c.Ping(t.Context()).Err(); err != nil { // dialled before the race
			t.Fatal(err)
		}
		gates[i] = quietGate(t, c, name, Config{})
	}
	for round := int64(0); round < 5; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		start := make(chan struct{})
		for _, g := range gates {
			wg.Go(func() {
				<-start
				st := limitctl.New(g.p, 1, 0)
				if g.write(round, st, true, 0) {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 {
			t.Fatalf("version %d: %d closers won, want exactly 1", round, won)
		}
	}
	var lost uint64
	for _, g := range gates {
		s := g.Stats()
		lost += s.CloseLost
		if s.CloseErrors > 0 {
			t.Errorf("%d close calls failed", s.CloseErrors)
		}
	}
	if lost != 5*(n-1) {
		t.Errorf("CloseLost summed %d, want %d", lost, 5*(n-1))
	}
}

// TestHealsSemaphoreLimit: a semaphore limit that differs from the state's
// (its decider died before SetLimit) is set back by the next process that
// sees it differ in two flushes of the same state version.
func TestHealsSemaphoreLimit(t *testing.T) {
	db := redistest.Connect(t)
	name := db.Key("heal")
	g := quietGate(t, db.Client, name, Config{Initial: 6, Max: 50})
	ctx := context.Background()
	h, err := g.Hold(ctx, 1) // something in flight, so flush does not skip
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	g.flush() // no state: initialise (limit 6)
	if lim := g.Limit(); lim != 6 {
		t.Fatalf("limit after initialising: %d, want 6", lim)
	}
	if err := g.sem.SetLimit(ctx, 17); err != nil {
		t.Fatal(err)
	}
	g.flush()
	if s := g.Stats(); s.Healed != 0 {
		t.Fatalf("healed after one flush seeing the difference")
	}
	g.flush()
	st, err := g.sem.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Limit != 6 || g.Stats().Healed != 1 {
		t.Errorf("semaphore limit after two flushes: %d (healed %d), want 6 (1)", st.Limit, g.Stats().Healed)
	}
}

// TestStateExpired: when the gate's keys expire (or are lost) the fleet
// starts again from a new state, version 1, which a process that knew a
// later version takes in.
func TestStateExpired(t *testing.T) {
	db := redistest.Connect(t)
	g := quietGate(t, db.Client, db.Key("expired"), Config{Initial: 3})
	h, err := g.Hold(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	g.flush() // version 1
	st := g.state
	st.Limit = 7
	if !g.write(1, st, true, 0) || !g.write(2, st, true, 0) {
		t.Fatalf("closes lost")
	}
	if g.ver != 3 || g.Limit() != 7 || g.round != 3 {
		t.Fatalf("after two closes: version %d, limit %d, round %d; want 3, 7, 3", g.ver, g.Limit(), g.round)
	}
	if err := db.Client.Del(context.Background(), g.keys[0], g.keys[1]).Err(); err != nil {
		t.Fatal(err)
	}
	g.flush() // no state: initialises again
	g.flush()
	if g.ver != 1 || g.Limit() != 3 || g.round != 1 {
		t.Errorf("after the keys expired: version %d, limit %d, round %d; want 1, 3, 1", g.ver, g.Limit(), g.round)
	}
}
