// Command faults measures floodgate's fleet limits while Redis fails, beside
// the Redis rate limiters a user would otherwise pick, and writes
// FAULTS.md.
//
// Run it from the bench directory (`make faults` at the repository root
// does):
//
//	go run ./faults              # every scenario, about 13 minutes
//	go run ./faults -quick       # one short scenario, for a look (the smoke test's)
//	go run ./faults -quick -run frozen  # short phases, the scenarios matching frozen
//	go run ./faults -run 'GCRA/frozen'  # only the scenarios whose name matches
//
// A scenario is one subject (floodgate's fixed-window and GCRA meters of
// shaperredis, its distsem semaphore, go-redis/redis_rate, throttled's GCRA
// on its go-redis store) through one fault (none, Redis frozen, Redis
// restarted empty, a failover to a replica that lost recent writes, one
// process partitioned, a slow Redis) under one failure policy (FailOpen,
// FailClosed, FailLocal; the peers have none). Each runs a fleet of
// processes, each its own go-redis client dialing its own fault proxy
// (floodgatetest.Proxy) and its own breaker and limiter, against
// redis-servers of its own that the program starts (REDIS_SERVER, else
// /usr/bin/redis-server, else redis-server on PATH) and stops. Scenarios
// run -parallel at a time, each on its own servers. FAULTS.md says what is
// measured and how.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/floodgate-go/floodgate/breaker"
)

type config struct {
	quick    bool
	out      string
	parallel int
	filter   *regexp.Regexp
}

func main() {
	var c config
	var re string
	flag.BoolVar(&c.quick, "quick", false, "short phases and one scenario (floodgate fixed window, Redis frozen 3s, FailLocal; with -run, the scenarios it matches), for a look; not for publishing")
	flag.StringVar(&c.out, "out", "FAULTS.md", "report file")
	flag.IntVar(&c.parallel, "parallel", 3, "scenarios run at once, each on redis-servers of its own")
	flag.StringVar(&re, "run", "", "run only the scenarios whose name matches this regexp (the report then has only them)")
	flag.Parse()
	var err error
	if c.filter, err = regexp.Compile(re); err != nil {
		fmt.Fprintln(os.Stderr, "faults: -run:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, c, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

// report is a finished run: what writeReport needs.
type report struct {
	p                  params
	quick              bool
	start, end         time.Time
	loadStart, loadEnd string
	nice               string
	redisVersion       string
	parallel           int
	results            []*result
	kit                *kitSuite // the kit's own suite, timed in a full run
}

func run(ctx context.Context, c config, log io.Writer) error {
	rep, err := measure(ctx, c, log)
	if err != nil {
		return err
	}
	f, err := os.Create(c.out)
	if err != nil {
		return err
	}
	writeReport(f, rep)
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(log, "faults: wrote %s in %s\n", c.out, rep.end.Sub(rep.start).Round(time.Second))
	return nil
}

// measure runs the scenarios c selects and returns their results in the
// order of scenarios().
func measure(ctx context.Context, c config, log io.Writer) (*report, error) {
	bin := redisproc.Binary()
	if bin == "" {
		return nil, errors.New("no redis-server: set REDIS_SERVER")
	}
	p := fullParams
	all := scenarios()
	if c.quick {
		p = quickParams
		if c.filter.String() == "" {
			all = []scenario{quickScenario}
		}
	}
	var todo []scenario
	for _, sc := range all {
		if c.filter.MatchString(sc.name()) {
			todo = append(todo, sc)
		}
	}
	if len(todo) == 0 {
		return nil, errors.New("no scenario matches -run")
	}
	tmp, err := os.MkdirTemp("", "floodgate-faults-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep := &report{p: p, quick: c.quick, start: time.Now(), loadStart: loadAvg(), parallel: c.parallel, nice: niceness(),
		redisVersion: serverVersion(ctx, bin)}
	if !c.quick && c.filter.String() == "" {
		// Before the scenarios, on a machine they do not load.
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		k := runKitSuite(ctx, root, bin)
		rep.kit = &k
		fmt.Fprintf(log, "faults: the kit's suite: %s (%s with the build), err %v\n", k.took, k.wall.Round(100*time.Millisecond), k.err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	stalls := watchStalls(wctx)
	defer func() { stopWatch(); stalls.wait() }()
	cal := &calendar{}
	results := make([]*result, len(todo))
	errs := make([]error, len(todo))
	// c.parallel workers take the scenarios in order (the longest first).
	var wg sync.WaitGroup
	var mu sync.Mutex
	next, finished := 0, 0
	for range max(1, c.parallel) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(todo) || ctx.Err() != nil {
					return
				}
				sc := todo[i]
				dir, err := dirFor(tmp, fmt.Sprint(i))
				if err == nil {
					results[i], err = runScenario(ctx, sc, p, bin, dir, cal)
				}
				errs[i] = err
				mu.Lock()
				finished++
				fmt.Fprintf(log, "faults: %d/%d %s (%s)\n", finished, len(todo), sc.name(), time.Since(rep.start).Round(time.Second))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.results = slices.DeleteFunc(results, func(r *result) bool { return r == nil })
	for _, r := range rep.results {
		r.stall = stalls.worst(r.tl.t0, r.tl.end)
	}
	rep.end, rep.loadEnd = time.Now(), loadAvg()
	return rep, nil
}

// quickScenario is -quick's without -run.
var quickScenario = scenario{subj: fgWindow, fault: frozen, policy: breaker.FailLocal}

// niceness returns this process's nice value (field 19 of /proc/self/stat),
// or "unknown".
func niceness() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return "unknown"
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 17 {
		return "unknown"
	}
	return f[16]
}

// loadAvg1 returns the 1-minute load average.
func loadAvg1() string {
	l, _, _ := strings.Cut(loadAvg(), " ")
	return l
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	var a, b5, c float64
	if _, err := fmt.Sscan(string(b), &a, &b5, &c); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", a, b5, c)
}

// serverVersion returns the version bin --version reports.
func serverVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}
