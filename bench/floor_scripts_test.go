package bench

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestFloorScriptsMakeDistsemCommands: the floor rows of
// BenchmarkDistsemScriptCPU restate by hand the commands that distsem's fast
// paths make, so the floors mean "the same commands with no other Lua" only
// while the two agree. Under MONITOR, each floor script makes the commands
// (names, in order) that the distsem call it stands for makes on a real
// semaphore: the uncontended acquire and release (floor-pair), and a
// contended grant's queued acquire and hand-off release, with a queue of one
// and one holder (floor-grant) and behind waiters with 4 holders
// (floor-grant32 and floor-grant128).
func TestFloorScriptsMakeDistsemCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(redistest.Options(srv.Addr))
	defer rdb.Close()
	ctx := t.Context()
	mon := startMonitor(t, rdb, srv.Addr)
	// Leases and heartbeats long enough that no renewal or heartbeat call
	// falls inside a measured stretch on a slow machine; the commands do not
	// depend on them.
	cfg := distsem.Config{Lease: time.Minute, WaiterTTL: time.Minute}

	t.Run("pair", func(t *testing.T) {
		s := distsem.New(rdb, "mon-pair", 1<<20, cfg)
		defer s.Close()
		warm(t, s) // the first call of a new semaphore takes the general path
		var p *distsem.Permit
		acquire := mon.commands(t, func() { p = acquireOrFatal(t, s) })
		release := mon.commands(t, func() { releaseOrFatal(t, p) })
		s.Close()
		pair := newFloorPair(t, rdb)
		floor := mon.commands(t, pair)
		if want := append(slices.Clone(acquire), release...); !slices.Equal(floor, want) {
			t.Errorf("floor-pair makes\n\t%v\ndistsem's acquire and release make\n\t%v\n\t%v", floor, acquire, release)
		}
	})

	for _, tc := range []struct {
		name            string
		holders, behind int // the semaphore's limit, all held; waiters already queued
		floorBacklog    int // newFloorGrant's backlog
	}{
		{"queue of one", 1, 0, 0},
		{"behind waiters", 4, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := distsem.New(rdb, "mon-grant-"+strconv.Itoa(tc.holders), int64(tc.holders), cfg)
			defer s.Close()
			warm(t, s)
			var held []*distsem.Permit
			defer func() {
				for _, p := range held {
					p.Release(context.Background())
				}
			}()
			for range tc.holders {
				held = append(held, acquireOrFatal(t, s))
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var waiters []chan *distsem.Permit // in queue order
			queue := func(ctx context.Context) {
				c := make(chan *distsem.Permit, 1)
				waiters = append(waiters, c)
				go func() {
					p, err := s.Acquire(ctx, 1)
					if err != nil {
						p = nil
					}
					c <- p
				}()
				mon.awaitQueued(t)
			}
			// handOff releases the oldest holder, whose permit goes to the
			// head waiter, and waits for that waiter's Acquire to return.
			handOff := func() {
				releaseOrFatal(t, held[0])
				held = held[1:]
				select {
				case p := <-waiters[0]:
					if p == nil {
						t.Fatal("the head waiter was not granted")
					}
					held = append(held, p)
					waiters = waiters[1:]
				case <-time.After(10 * time.Second):
					t.Fatal("the head waiter was not granted within 10s")
				}
			}
			// A first grant: the first waiter of a process subscribes to
			// its hand-off channel and then calls again (which the
			// contended rows do once, not per grant).
			mon.commands(t, func() {
				queue(wctx)
				handOff()
				// That waiter made two calls: its release writes a
				// tombstone. The holder released below made one.
				releaseOrFatal(t, held[len(held)-1])
				held[len(held)-1] = acquireOrFatal(t, s)
			})
			// A tombstone stored, as in the contended rows: a waiter that
			// gives up leaves one.
			mon.commands(t, func() {
				cctx, ccancel := context.WithCancel(ctx)
				queue(cctx)
				ccancel()
				if p := <-waiters[len(waiters)-1]; p != nil {
					t.Fatal("a cancelled waiter was granted")
				}
				waiters = waiters[:len(waiters)-1]
				mon.awaitTombstone(t) // its withdrawal runs in the background
			})
			for range tc.behind {
				mon.commands(t, func() { queue(wctx) })
			}
			queued := mon.commands(t, func() { queue(wctx) })
			handedOff := mon.commands(t, handOff)

			// Nothing of this semaphore may run during the floor's calls.
			cancel()
			for _, c := range waiters {
				if p := <-c; p != nil {
					held = append(held, p)
				}
			}
			for _, p := range held {
				releaseOrFatal(t, p)
			}
			held = nil
			s.Close()

			floorQueue, floorHandOff := newFloorGrant(t, rdb, tc.floorBacklog)
			if floor := mon.commands(t, floorQueue); !slices.Equal(floor, queued) {
				t.Errorf("floorGrantQueued makes\n\t%v\ndistsem's queued acquire makes\n\t%v", floor, queued)
			}
			if floor := mon.commands(t, floorHandOff); !slices.Equal(floor, handedOff) {
				t.Errorf("floorGrantHandOff makes\n\t%v\ndistsem's hand-off release makes\n\t%v", floor, handedOff)
			}
		})
	}
}

func warm(t *testing.T, s *distsem.Semaphore) {
	t.Helper()
	releaseOrFatal(t, acquireOrFatal(t, s))
}

func acquireOrFatal(t *testing.T, s *distsem.Semaphore) *distsem.Permit {
	t.Helper()
	p, err := s.Acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func releaseOrFatal(t *testing.T, p *distsem.Permit) {
	t.Helper()
	if err := p.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A monitor reads a MONITOR connection to the test's redis-server.
type monitor struct {
	rdb   *redis.Client
	conn  net.Conn
	r     *bufio.Reader
	marks int
	seen  []string // lines read by await inside a commands call, kept for it
}

func startMonitor(t *testing.T, rdb *redis.Client, addr string) *monitor {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &monitor{rdb: rdb, conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if l := m.line(t); l != "+OK" {
		t.Fatalf("MONITOR answered %q", l)
	}
	return m
}

// line reads one line of the monitor (a deadline of 10s fails the test).
func (m *monitor) line(t *testing.T) string {
	t.Helper()
	m.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := m.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading MONITOR: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

// mark sends an ECHO that the monitor will show, and returns its text.
func (m *monitor) mark(t *testing.T) string {
	t.Helper()
	m.marks++
	text := "floor-scripts-mark-" + strconv.Itoa(m.marks)
	if err := m.rdb.Echo(context.Background(), text).Err(); err != nil {
		t.Fatal(err)
	}
	return text
}

// commands runs fn between two marks and returns the names of the commands
// that scripts made between them, in order (MONITOR shows them as "[0 lua]").
func (m *monitor) commands(t *testing.T, fn func()) []string {
	t.Helper()
	start := m.mark(t)
	m.seen = nil
	for !strings.Contains(m.line(t), `"`+start+`"`) {
	}
	fn()
	end := m.mark(t)
	lines := m.seen
	for {
		l := m.line(t)
		if strings.Contains(l, `"`+end+`"`) {
			break
		}
		lines = append(lines, l)
	}
	m.seen = nil
	var names []string
	for _, l := range lines {
		_, rest, ok := strings.Cut(l, " lua] ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		names = append(names, strings.ToUpper(strings.Trim(name, `"`)))
	}
	return names
}

// awaitQueued reads the monitor, inside a commands call, until a waiter's
// queued acquire has run (a script's ZADD NX to a queue key); the lines read
// are kept for commands.
func (m *monitor) awaitQueued(t *testing.T) {
	t.Helper()
	m.await(t, `}:q" "NX"`)
}

// awaitTombstone reads the monitor, inside a commands call, until a script
// has written a tombstone (a ZADD to a tombstone key).
func (m *monitor) awaitTombstone(t *testing.T) {
	t.Helper()
	m.await(t, `}:t" "`)
}

// await reads the monitor until a line of a script's ZADD to a mon-grant
// semaphore's key that contains suffix (the end of the key's name and what
// follows it); the lines read are kept in seen.
func (m *monitor) await(t *testing.T, suffix string) {
	t.Helper()
	for {
		l := m.line(t)
		m.seen = append(m.seen, l)
		if strings.Contains(l, ` lua] "ZADD" "{mon-grant-`) && strings.Contains(l, suffix) {
			return
		}
	}
}

// TestIsAcquire: the round-trip counter of the distsem benchmarks counts
// distsem's acquire calls and nothing else: an uncontended acquire, a queued
// waiter's calls, the renewals of a held permit and the releases are sent,
// and only the acquires are counted as such.
func TestIsAcquire(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(redistest.Options(srv.Addr))
	defer rdb.Close()
	ctx := t.Context()
	var acquires, renews, others atomic.Int64
	c := &rttCounter{}
	rdb.AddHook(c)
	rdb.AddHook(newScriptSpy(&acquires, &renews, &others))
	// Short leases, so that the permit held below is renewed (every third of a
	// lease) while the test waits.
	s := distsem.New(rdb, "isacquire", 1, distsem.Config{Lease: 300 * time.Millisecond, WaiterTTL: 300 * time.Millisecond,
		Breaker: breaker.New("isacquire", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	defer s.Close()
	p := acquireOrFatal(t, s)
	// A second caller queues behind p and heartbeats until p is released.
	got := make(chan error, 1)
	go func() {
		q, err := s.Acquire(ctx, 1)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for renews.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // real time: Redis's clock drives the renewals
	}
	if renews.Load() < 2 {
		t.Fatalf("%d renewals in 10s, want at least 2", renews.Load())
	}
	releaseOrFatal(t, p)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if a := acquires.Load(); a < 2 || c.acquire.Load() != a {
		t.Errorf("isAcquire counted %d calls, the acquire script was called %d times (want at least 2)", c.acquire.Load(), a)
	}
	t.Logf("%d acquire, %d renew and %d other script calls", acquires.Load(), renews.Load(), others.Load())
}

// scriptSpy counts the distsem script calls by the script they run, told
// apart by its source: EVAL sends it; an EVALSHA is known by the digest of a
// source sent before, or (the first, refused with NOSCRIPT) by the EVAL that
// follows it.
type scriptSpy struct {
	acquires, renews, others *atomic.Int64
	mu                       *sync.Mutex
	kinds                    map[string]*atomic.Int64 // by digest
	pending                  map[string]int64         // EVALSHAs of a digest not yet known
}

func newScriptSpy(acquires, renews, others *atomic.Int64) scriptSpy {
	return scriptSpy{acquires, renews, others, &sync.Mutex{}, map[string]*atomic.Int64{}, map[string]int64{}}
}

func (scriptSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		name := cmd.Name()
		if (name != "evalsha" && name != "eval") || len(a) < 2 {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if name == "evalsha" {
			sha, _ := a[1].(string)
			if k := h.kinds[sha]; k != nil {
				k.Add(1)
			} else {
				h.pending[sha]++
			}
			return err
		}
		src, _ := a[1].(string)
		k := h.others
		switch {
		case strings.Contains(src, "\n-- acquire.lua: "):
			k = h.acquires
		case strings.Contains(src, "\n-- renew.lua: "):
			k = h.renews
		}
		sum := sha1.Sum([]byte(src))
		sha := hex.EncodeToString(sum[:])
		h.kinds[sha] = k
		k.Add(1 + h.pending[sha])
		delete(h.pending, sha)
		return err
	}
}

func (scriptSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
