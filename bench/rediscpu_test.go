package bench

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Redis CPU of scripts, counted once.
//
// INFO commandstats gives each command's calls and the microseconds spent in
// it. A command a script calls (redis.call('GET', ...)) is counted twice in
// Redis 7: in the script command's own usec, which includes everything the
// script did, and again on its own line (cmdstat_get). Summing every line, as
// a first version of these benchmarks did, counts a GCRA decision's TIME, GET
// and SET twice (about 2.3 µs per decision on the reference machine).
//
// redisCPUOnce counts each microsecond once: the script commands (eval,
// evalsha, their _ro forms, fcall, fcall_ro) in full, and every other command
// only for the share of its calls that the benchmark's clients sent
// themselves, as a go-redis hook counts them, so that a client's own GET (as
// throttled's go-redis store sends) is counted while a script's GET is not
// counted again. INFO, the measurement itself, is left out.

// usecOnce is the Redis CPU from before to after in µs, each command counted
// once: the script commands in full, every other command (INFO excepted) in
// the share of its calls in the window that direct says the clients sent
// (direct: calls sent per command name, lower case, in the same window).
func usecOnce(before, after map[string]redistest.CmdStat, direct map[string]int64) float64 {
	var total float64
	for name, a := range after {
		bf := before[name]
		calls, usec := a.Calls-bf.Calls, a.Usec-bf.Usec
		base, _, _ := strings.Cut(name, "|")
		switch {
		case calls <= 0 || usec <= 0 || base == "info":
		case redistest.ScriptCommands[base]:
			total += float64(usec)
		default:
			own := min(direct[base], calls)
			total += float64(usec) * float64(own) / float64(calls)
		}
	}
	return total
}

// cmdCounter is a go-redis hook that counts the commands a client sends, by
// name, pipelined ones included.
type cmdCounter struct {
	mu sync.Mutex
	// mu guards:
	n map[string]int64
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *cmdCounter) count(cmd redis.Cmder) {
	name := strings.ToLower(cmd.Name())
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[name]++
	c.mu.Unlock()
}

func (c *cmdCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		s[k] = v
	}
	return s
}

// counters holds the one cmdCounter hooked to each client.
var counters sync.Map // *redis.Client → *cmdCounter

func counterOf(rdb *redis.Client) *cmdCounter {
	if c, ok := counters.Load(rdb); ok {
		return c.(*cmdCounter)
	}
	c, loaded := counters.LoadOrStore(rdb, &cmdCounter{})
	if !loaded {
		rdb.AddHook(c.(*cmdCounter))
	}
	return c.(*cmdCounter)
}

// A cpuOnceWindow measures the Redis CPU of a stretch of a benchmark.
type cpuOnceWindow struct {
	rdb     *redis.Client
	clients []*cmdCounter
	stats   map[string]redistest.CmdStat
	direct  []map[string]int64
	done    atomic.Bool
	// script is, once usec has returned, the window's µs in the script
	// commands alone (each script's whole cost, inner commands included).
	script float64
}

// redisCPUOnce starts a window on the Redis rdb talks to: one INFO commandstats
// call on rdb now and one in usec. clients are the clients whose own commands
// count (rdb is always one of them); each gets a counting hook the first time
// it is named. Name every client before it sends the commands to measure,
// the first time while no other goroutine uses it (go-redis's AddHook is not
// safe for concurrent use).
func redisCPUOnce(tb testing.TB, rdb *redis.Client, clients ...*redis.Client) *cpuOnceWindow {
	w := &cpuOnceWindow{rdb: rdb}
	for _, cl := range append([]*redis.Client{rdb}, clients...) {
		c := counterOf(cl)
		w.clients = append(w.clients, c)
		w.direct = append(w.direct, c.snapshot())
	}
	w.stats = redistest.CommandStats(tb, rdb)
	return w
}

// usec ends the window and returns its Redis CPU in µs, each command counted
// once (see usecOnce).
func (w *cpuOnceWindow) usec(tb testing.TB) float64 {
	if w.done.Swap(true) {
		tb.Fatal("cpuOnceWindow.usec called twice")
	}
	after := redistest.CommandStats(tb, w.rdb)
	direct := map[string]int64{}
	for i, c := range w.clients {
		for k, v := range c.snapshot() {
			direct[k] += v - w.direct[i][k]
		}
	}
	for name, a := range after {
		if base, _, _ := strings.Cut(name, "|"); redistest.ScriptCommands[base] {
			w.script += float64(max(0, a.Usec-w.stats[name].Usec))
		}
	}
	return usecOnce(w.stats, after, direct)
}
