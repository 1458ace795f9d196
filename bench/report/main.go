// Command report runs the side-by-side benchmarks of floodgate/bench and writes
// RESULTS.md: the machine, then every row as floodgate beside its peer,
// median and spread over several rounds in which the implementations
// alternate.
//
// Run it from the bench directory (`make bench` at the repository root does):
//
//	go run ./report            # the full report, about 15 minutes
//	go run ./report -quick     # fewer, shorter rounds, for a look
//	go run ./report -adaptive-only  # rerun only the simulator and fleet sections
//	go run ./report -callgrind-only # rerun only the callgrind pass
//
// Besides the benchmarks it runs the tests of the bench package that write
// markdown of their own (adaptiveTests): TestAdaptiveSim (the adaptive
// concurrency simulator, 20 runs per scenario and limiter, 3 with -quick),
// TestAdaptiveFleetReport (the fleet of adaptive gates on Redis), TestShedSim
// (shedding by criticality in the simulator) and TestBackoffReport (the
// backing-off client), and puts what they wrote under headings of their
// own; -adaptive-only runs just those and replaces their sections in the
// existing report.
//
// Then, where valgrind is installed, the callgrind pass (callgrind.go) counts
// the instructions Redis executes per operation of the sequential Redis
// script cases, a figure the machine's load does not move.
//
// The targets the benchmarks' doc comments state (Target: sentences, see
// targets.go) are checked on the results and shown with met or missed, in the
// summary and in a Targets section.
//
// Without REDIS_ADDR it starts its own redis-server (REDIS_SERVER, else
// /usr/bin/redis-server, else redis-server on PATH) on a free loopback port
// and stops it on every exit. Benchmarks whose name contains Pgx run only
// when DATABASE_URL is set.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

type config struct {
	quick     bool
	adaptive  bool // run the adaptive concurrency tests
	adaptOnly bool // only them, spliced into the existing report
	callgrind bool // run the callgrind pass (callgrind.go)
	cgOnly    bool // only it, spliced into the existing report
	rounds    int
	out, raw  string
	benchRe   string
	localTime string // -benchtime of local benchmarks
	redisTime string // -benchtime of Redis and PostgreSQL benchmarks
}

func main() {
	var c config
	flag.BoolVar(&c.quick, "quick", false, "3 short rounds instead of the full run (for a look; not for publishing)")
	flag.IntVar(&c.rounds, "rounds", 0, "rounds (default 5, or 3 with -quick)")
	flag.StringVar(&c.out, "out", "RESULTS.md", "report file")
	flag.StringVar(&c.raw, "raw", "", "also write the raw `go test -bench` output here (benchstat reads it)")
	flag.StringVar(&c.benchRe, "bench", ".", "run only benchmarks matching this regexp")
	flag.BoolVar(&c.adaptive, "adaptive", true, "run the tests that write sections of their own (TestAdaptiveSim, TestAdaptiveFleetReport, TestShedSim, TestBackoffReport) and include them")
	flag.BoolVar(&c.adaptOnly, "adaptive-only", false, "run only the tests that write sections of their own and replace those sections in -out, keeping the rest of it")
	flag.BoolVar(&c.callgrind, "callgrind", true, "count the Redis scripts' instructions per operation, and a few in-process rows', under valgrind's callgrind (a few minutes) and include them")
	flag.BoolVar(&c.cgOnly, "callgrind-only", false, "run only the callgrind pass and replace its section in -out, keeping the rest of it")
	flag.Parse()
	if c.rounds <= 0 {
		c.rounds = 5
		if c.quick {
			c.rounds = 3
		}
	}
	c.localTime, c.redisTime = "300ms", "1s"
	if c.quick {
		c.localTime, c.redisTime = "50ms", "200ms"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// slowBench are the benchmarks that talk to a server or over a socket: they get the longer
// -benchtime.
var slowBench = regexp.MustCompile(`Redis|Distsem|Pgx|Workers|Loopback`)

// pgxBench need DATABASE_URL.
var pgxBench = regexp.MustCompile(`(?i)pgx|postgres`)

func run(ctx context.Context, c config) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the bench directory (cd bench && go run ./report)")
	}
	filter, err := regexp.Compile(c.benchRe)
	if err != nil {
		return fmt.Errorf("-bench: %w", err)
	}
	m := machine{start: time.Now(), loadStart: loadAvg(), quick: c.quick}
	env := os.Environ()

	redisBin := redisproc.Binary()
	if redisBin != "" {
		env = append(env, "REDIS_SERVER="+redisBin) // for the distsem benchmarks' own servers
	}
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		if redisBin == "" {
			return errors.New("no redis-server: set REDIS_SERVER or REDIS_ADDR")
		}
		srv, err := redisproc.Start(ctx, redisBin, "")
		if err != nil {
			return err
		}
		defer srv.Kill()
		addr = srv.Addr()
		env = append(env, "REDIS_ADDR="+addr)
		m.redisWhere = "started by the report on " + addr
	} else {
		m.redisWhere = "REDIS_ADDR=" + addr
	}
	m.redisVersion = redisVersion(ctx, addr)

	tmp, err := os.MkdirTemp("", "floodgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bench.test")
	fmt.Fprintln(os.Stderr, "report: building the benchmarks")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go test -c: %w", err)
	}
	if c.adaptOnly {
		return spliceAdaptive(ctx, c, bin, tmp, env)
	}
	if c.cgOnly {
		return spliceCallgrind(ctx, c, bin, redisBin, tmp, env)
	}
	out, err := exec.CommandContext(ctx, bin, "-test.list", "^Benchmark").Output()
	if err != nil {
		return fmt.Errorf("listing benchmarks: %w", err)
	}
	var res results
	var benches []string
	for _, name := range strings.Fields(string(out)) {
		switch {
		case !strings.HasPrefix(name, "Benchmark") || !filter.MatchString(name):
		case pgxBench.MatchString(name) && os.Getenv("DATABASE_URL") == "":
			res.notes = append(res.notes, name+" not run: DATABASE_URL is not set")
		default:
			benches = append(benches, name)
		}
	}
	if len(benches) == 0 {
		return errors.New("no benchmarks to run")
	}

	res.targets, res.informal, err = docTargets(".")
	if err != nil {
		return fmt.Errorf("reading the benchmarks' targets: %w", err)
	}
	if wired, err := cpuOnceWired("."); err != nil {
		return err
	} else if !wired {
		res.notes = append(res.notes, "redis-µs/op is not yet counted as How it is measured says: no Redis benchmark calls redisCPUOnce, so it is still the sum of every INFO commandstats line, a script's inner commands counted twice")
	}

	var raw bytes.Buffer
	for round := range c.rounds {
		m.loads = append(m.loads, loadAvg())
		// Rotate the order of the benchmarks from round to round, so no
		// benchmark always runs first or after the same neighbour.
		for i := range benches {
			name := benches[(i+round)%len(benches)]
			bt := c.localTime
			switch {
			case strings.Contains(name, "ShaperAccuracy"):
				bt = "1x" // each iteration is a 300ms paced run
			case slowBench.MatchString(name):
				bt = c.redisTime
			}
			fmt.Fprintf(os.Stderr, "report: round %d/%d: %s (%s)\n", round+1, c.rounds, name, time.Since(m.start).Round(time.Second))
			cmd := exec.CommandContext(ctx, bin, "-test.run=^$", "-test.bench=^"+name+"$", "-test.benchmem",
				"-test.count=1", "-test.benchtime="+bt, "-test.timeout=10m")
			cmd.Env = env
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the report
			var o bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &o
			err := cmd.Run()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			raw.Write(o.Bytes())
			p := parseOutput(bytes.NewReader(o.Bytes()))
			if err != nil {
				p.notes = append(p.notes, fmt.Sprintf("%s exited with %v in round %d (its measured cases are kept)", name, err, round+1))
				os.Stderr.Write(lastLines(o.Bytes(), 20))
			}
			res.add(round, p)
		}
	}
	if c.adaptive {
		fmt.Fprintf(os.Stderr, "report: the adaptive concurrency tests (%s)\n", time.Since(m.start).Round(time.Second))
		secs, notes, err := runAdaptive(ctx, bin, tmp, env, c.quick)
		if err != nil {
			return err
		}
		res.sections = secs
		res.notes = append(res.notes, notes...)
	}
	if c.callgrind && redisBin != "" {
		fmt.Fprintf(os.Stderr, "report: the callgrind pass (%s)\n", time.Since(m.start).Round(time.Second))
		sec, notes := runCallgrind(ctx, bin, redisBin, tmp, env)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if sec != nil {
			res.sections = append(res.sections, *sec)
		}
		res.notes = append(res.notes, notes...)
	}
	m.end, m.loadEnd = time.Now(), loadAvg()
	m.rounds, m.localTime, m.redisTime = c.rounds, c.localTime, c.redisTime

	if c.raw != "" {
		if err := os.WriteFile(c.raw, raw.Bytes(), 0o644); err != nil {
			return err
		}
	}
	var doc bytes.Buffer
	writeReport(&doc, &m, &res)
	if err := os.WriteFile(c.out, doc.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "report: wrote %s in %s\n", c.out, m.end.Sub(m.start).Round(time.Second))
	return nil
}

// spliceAdaptive runs only the adaptive concurrency tests and puts their
// sections into the existing report in place of the old ones.
func spliceAdaptive(ctx context.Context, c config, bin, tmp string, env []string) error {
	doc, err := os.ReadFile(c.out)
	if err != nil {
		return fmt.Errorf("-adaptive-only needs the existing report: %w", err)
	}
	start := time.Now()
	fmt.Fprintln(os.Stderr, "report: the adaptive concurrency tests")
	secs, notes, err := runAdaptive(ctx, bin, tmp, env, c.quick)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "report:", n)
	}
	if len(secs) == 0 {
		return errors.New("the adaptive concurrency tests wrote nothing; the report is unchanged")
	}
	if err := os.WriteFile(c.out, []byte(spliceSections(string(doc), secs)), 0o644); err != nil {
		return err
	}
	var hs []string
	for _, s := range secs {
		hs = append(hs, "\""+s.heading+"\"")
	}
	fmt.Fprintf(os.Stderr, "report: wrote %s into %s in %s\n", strings.Join(hs, " and "), c.out, time.Since(start).Round(time.Second))
	return nil
}

// spliceCallgrind runs only the callgrind pass and puts its section into the
// existing report in place of the old one.
func spliceCallgrind(ctx context.Context, c config, bin, redisBin, tmp string, env []string) error {
	doc, err := os.ReadFile(c.out)
	if err != nil {
		return fmt.Errorf("-callgrind-only needs the existing report: %w", err)
	}
	if redisBin == "" {
		return errors.New("-callgrind-only needs a redis-server binary (REDIS_SERVER)")
	}
	sec, notes := runCallgrind(ctx, bin, redisBin, tmp, env)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "report:", n)
	}
	if sec == nil {
		return errors.New("the callgrind pass measured nothing; the report is unchanged")
	}
	if err := os.WriteFile(c.out, []byte(spliceSections(string(doc), []fragment{*sec})), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "report: wrote %q into %s\n", sec.heading, c.out)
	return nil
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], nil)
}

func redisVersion(ctx context.Context, addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return infoField(info, "redis_version")
}

// infoField returns the value of key in an INFO reply.
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return "unknown"
}

type machine struct {
	quick                bool
	start, end           time.Time
	loadStart, loadEnd   string
	loads                []string // at the start of each round
	redisVersion         string
	redisWhere           string
	rounds               int
	localTime, redisTime string
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo io.Reader) string {
	b, err := io.ReadAll(cpuinfo)
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func cpuModelOfThisMachine() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	return cpuModel(f)
}
