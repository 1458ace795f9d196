package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The callgrind pass counts the instructions Redis executes in EVALSHA per
// operation, for the Redis script cases whose time the benchmarks measure
// (script-µs/op): redis-server runs under valgrind's callgrind with
// collection on only inside evalShaCommand, so what is counted is a script
// call's work in Redis, its inner commands included, and nothing of reading
// requests or writing replies. An instruction count does not depend on what
// else the machine is doing: on a shared machine whose timings swing by
// ±50% it is the repeatable figure (the same case twice agrees within a few
// tenths of a percent), though not a time: it weighs a cache miss like any
// other instruction.
//
// Each case runs twice, with -benchtime=n1x and n2x, each on a fresh server:
// (instructions of the second - of the first) / (n2 - n1) is the count per
// operation, without the warm-up calls, the script loads and the setup that
// both runs make. Of the contended cases only the one with 32 waiters is
// counted: under valgrind Redis runs some 50 times slower, yet its waiters
// still queue behind 4 permits and are granted by hand-off, one queued
// acquire and one release per grant and a few percent of acquire calls more
// (about 1.07 per grant, against 1.02 timed), with no heartbeat due inside a
// wait. With 128 waiters the calls outlast their timeout under valgrind and
// the breaker opens, so that case is left out.

// The pass also counts the instructions of the whole benchmark process per
// operation for a few in-process rows: those whose timed ratios swing most
// on a shared machine, and those whose time is not explained by their work
// (the benchmark binary itself under callgrind, one goroutine (SemaphoreBlocked:
// its 64 on one P), GOMAXPROCS=1,
// asynchronous preemption off: callgrind cannot follow Go's preemption
// signals). These count the benchmark loop too, the same for
// every implementation of a row, and time.Now through the vDSO as valgrind
// runs it.

// A cgCase is one benchmark case measured by the callgrind pass.
type cgCase struct {
	bench string   // -test.bench pattern
	label string   // its name in the table
	vs    []string // labels of the cases it is compared with
	env   string   // the variable that points the benchmark at the server; "" for an in-process case
}

// local reports whether c is an in-process case (no Redis).
func (c cgCase) local() bool { return c.env == "" }

const (
	cgN1, cgN2 = 400, 1600
	// in-process cases: a call is some hundred instructions
	cgLocalN1, cgLocalN2 = 100_000, 300_000
	meterCase            = "^BenchmarkRedisMeterScript$/^conc=1$/^impl=%s$"
	distsemCPU           = "^BenchmarkDistsemScriptCPU$/^impl=%s$"
)

var cgCases = []cgCase{
	{fmt.Sprintf(meterCase, "floor"), "RedisMeterScript floor (TIME, GET, SET)", []string{"RedisMeterScript redis_rate"}, "REDIS_ADDR"},
	{fmt.Sprintf(meterCase, "redis_rate"), "RedisMeterScript redis_rate", nil, "REDIS_ADDR"},
	{fmt.Sprintf(meterCase, "gcra"), "RedisMeterScript gcra", []string{"RedisMeterScript redis_rate", "RedisMeterScript floor (TIME, GET, SET)"}, "REDIS_ADDR"},
	{fmt.Sprintf(meterCase, "tokenbucket"), "RedisMeterScript tokenbucket", []string{"RedisMeterScript redis_rate"}, "REDIS_ADDR"},
	{fmt.Sprintf(meterCase, "fixedwindow"), "RedisMeterScript fixedwindow", []string{"RedisMeterScript redis_rate"}, "REDIS_ADDR"},
	{fmt.Sprintf(meterCase, "slidingcounter"), "RedisMeterScript slidingcounter", []string{"RedisMeterScript redis_rate"}, "REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "evalsha"), "DistsemScriptCPU evalsha (trivial script)", nil, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "gcra"), "DistsemScriptCPU gcra", nil, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floor-pair"), "DistsemScriptCPU floor-pair", []string{"DistsemScriptCPU gcra"}, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floodgate-pair"), "DistsemScriptCPU floodgate-pair", []string{"DistsemScriptCPU gcra", "DistsemScriptCPU floor-pair"}, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floor-grant"), "DistsemScriptCPU floor-grant", []string{"DistsemScriptCPU floodgate-pair"}, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floor-grant32"), "DistsemScriptCPU floor-grant32", []string{"DistsemScriptCPU floodgate-pair"}, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floor-grant128"), "DistsemScriptCPU floor-grant128", []string{"DistsemScriptCPU floodgate-pair"}, "BENCH_PRIVATE_REDIS_ADDR"},
	{fmt.Sprintf(distsemCPU, "floodgate-contended32"), "DistsemScriptCPU floodgate-contended32", []string{"DistsemScriptCPU floodgate-pair", "DistsemScriptCPU floor-grant32"}, "BENCH_PRIVATE_REDIS_ADDR"},

	{"^BenchmarkBreakerSuccess$/^impl=gobreaker$", "BreakerSuccess gobreaker", nil, ""},
	{"^BenchmarkBreakerSuccess$/^impl=floor$", "BreakerSuccess floor", []string{"BreakerSuccess gobreaker"}, ""},
	{"^BenchmarkBreakerSuccess$/^impl=floodgate$/^timeout=off$", "BreakerSuccess floodgate, timeout off", []string{"BreakerSuccess gobreaker", "BreakerSuccess floor"}, ""},
	{"^BenchmarkSemaphoreAcquireRelease$/^impl=xsync$", "SemaphoreAcquireRelease xsync", nil, ""},
	{"^BenchmarkSemaphoreAcquireRelease$/^impl=floor$", "SemaphoreAcquireRelease floor", []string{"SemaphoreAcquireRelease xsync"}, ""},
	{"^BenchmarkSemaphoreAcquireRelease$/^impl=floodgate$", "SemaphoreAcquireRelease floodgate", []string{"SemaphoreAcquireRelease xsync", "SemaphoreAcquireRelease floor"}, ""},
	{"^BenchmarkSemaphoreBlocked$/^impl=xsync$/^procs=1$", "SemaphoreBlocked xsync, GOMAXPROCS 1", nil, ""},
	{"^BenchmarkSemaphoreBlocked$/^impl=floor-send$/^procs=1$", "SemaphoreBlocked floor-send, GOMAXPROCS 1", []string{"SemaphoreBlocked xsync, GOMAXPROCS 1"}, ""},
	{"^BenchmarkSemaphoreBlocked$/^impl=floodgate$/^procs=1$", "SemaphoreBlocked floodgate, GOMAXPROCS 1", []string{"SemaphoreBlocked xsync, GOMAXPROCS 1", "SemaphoreBlocked floor-send, GOMAXPROCS 1"}, ""},
	{"^BenchmarkOtelSemaphore$/^metrics=inline$", "OtelSemaphore inline", nil, ""},
	{"^BenchmarkOtelSemaphore$/^metrics=inline-guarded$", "OtelSemaphore inline-guarded", []string{"OtelSemaphore inline"}, ""},
	{"^BenchmarkOtelSemaphore$/^metrics=otel$", "OtelSemaphore otel", []string{"OtelSemaphore inline", "OtelSemaphore inline-guarded"}, ""},
}

// runCallgrind runs the callgrind pass with the benchmark binary bin and
// returns its section, or notes saying why it could not run.
func runCallgrind(ctx context.Context, bin, redisBin, tmp string, env []string) (*fragment, []string) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return nil, []string{"the callgrind pass did not run: no valgrind on PATH (Debian package valgrind)"}
	}
	counts := map[string]float64{}
	var notes []string
	for i, c := range cgCases {
		fmt.Fprintf(os.Stderr, "report: callgrind %d/%d: %s\n", i+1, len(cgCases), c.label)
		var ir [2]int64
		ns := [2]int{cgN1, cgN2}
		if c.local() {
			ns = [2]int{cgLocalN1, cgLocalN2}
		}
		for j, n := range ns {
			out := filepath.Join(tmp, fmt.Sprintf("callgrind.%d.%d.out", i, j))
			if c.local() {
				ir[j], err = callgrindLocal(ctx, vg, out, bin, c, n, env)
			} else {
				ir[j], err = callgrindRun(ctx, vg, redisBin, out, bin, c, n, env)
			}
			if err != nil {
				break
			}
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("callgrind: %s not measured: %v", c.label, err))
			continue
		}
		counts[c.label] = float64(ir[1]-ir[0]) / float64(ns[1]-ns[0])
	}
	if len(counts) == 0 {
		return nil, notes
	}
	return &fragment{heading: callgrindHeading, body: strings.TrimSpace(callgrindTable(counts))}, notes
}

const callgrindHeading = "Instructions per operation (callgrind)"

// callgrindTable renders the counts per operation with their ratios.
func callgrindTable(counts map[string]float64) string {
	var b strings.Builder
	b.WriteString("Instructions Redis executes inside EVALSHA per operation (a decision, an\n" +
		"Acquire+Release pair, a grant's two calls; for floodgate-contended32 all its\n" +
		"waiters' script calls per grant), counted by valgrind's callgrind: a figure\n" +
		"that does not move with the machine's load, beside the timed script-µs/op\n" +
		"above (see How it is measured). One run per case, sequential but for\n" +
		"floodgate-contended32, whose waiters queue as in the timed row.\n\n")
	b.WriteString("| case | instructions/op | compared with |\n|---|---|---|\n")
	cgRows(&b, counts, false)
	var local strings.Builder
	if cgRows(&local, counts, true) > 0 {
		b.WriteString("\nInstructions of the benchmark process per call for in-process rows whose\n" +
			"timed ratios swing most here, or whose time is not explained by their work\n" +
			"(the benchmark loop included, the same for every implementation of a row;\n" +
			"one goroutine, GOMAXPROCS=1; SemaphoreBlocked runs its 64 goroutines on one P,\n" +
			"so its count includes the scheduler's parking and waking of each waiter).\n\n")
		b.WriteString("| case | instructions/op | compared with |\n|---|---|---|\n")
		b.WriteString(local.String())
	}
	return b.String()
}

// cgRows writes the table rows of the measured cases that are in-process
// (local) or not, and returns how many it wrote.
func cgRows(b *strings.Builder, counts map[string]float64, local bool) int {
	rows := 0
	for _, c := range cgCases {
		n, ok := counts[c.label]
		if !ok || c.local() != local {
			continue
		}
		rows++
		var vs []string
		for _, v := range c.vs {
			if m, ok := counts[v]; ok && m > 0 {
				vs = append(vs, fmt.Sprintf("%.3g× %s", n/m, v))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", c.label, fmtCount(n), strings.Join(vs, "; "))
	}
	return rows
}

func fmtCount(n float64) string {
	if n >= 10000 {
		return fmt.Sprintf("%.1fk", n/1000)
	}
	return fmt.Sprintf("%.0f", n)
}

// callgrindRun runs case c with -benchtime=nx against a fresh redis-server
// under callgrind and returns the instructions collected in evalShaCommand.
func callgrindRun(ctx context.Context, vg, redisBin, out, bin string, c cgCase, n int, env []string) (int64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv := exec.CommandContext(ctx, vg, "--tool=callgrind", "--callgrind-out-file="+out, "--toggle-collect=evalShaCommand",
		redisBin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no")
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var log strings.Builder
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer rdb.Close()
	stop := func() error {
		rdb.ShutdownNoSave(ctx) // its reply is the connection closing
		select {
		case err := <-exited:
			return err
		case <-time.After(time.Minute):
			srv.Process.Kill()
			<-exited
			return errors.New("redis-server under valgrind did not exit after SHUTDOWN")
		}
	}
	ready := false
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		// A TCP connect first: go-redis logs every refused dial.
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			if rdb.Ping(ctx).Err() == nil {
				ready = true
				break
			}
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("redis-server under valgrind exited: %v: %s", err, lastLines([]byte(log.String()), 5))
		case <-time.After(100 * time.Millisecond): // polling a child's readiness
		}
	}
	if !ready {
		srv.Process.Kill()
		<-exited
		return 0, errors.New("redis-server under valgrind did not answer PING within a minute")
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run=^$", "-test.bench="+c.bench, "-test.count=1",
		"-test.benchtime="+strconv.Itoa(n)+"x", "-test.timeout=10m")
	cmd.Env = append(append([]string(nil), env...), c.env+"="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	o, berr := cmd.CombinedOutput()
	if err := stop(); err != nil {
		return 0, err
	}
	if berr != nil {
		return 0, fmt.Errorf("%v: %s", berr, lastLines(o, 5))
	}
	if !strings.Contains(string(o), "\nBenchmark") && !strings.HasPrefix(string(o), "Benchmark") {
		return 0, fmt.Errorf("no benchmark ran: %s", lastLines(o, 5))
	}
	return callgrindTotal(out)
}

// callgrindLocal runs in-process case c with -benchtime=nx under callgrind
// and returns the instructions of the whole process.
func callgrindLocal(ctx context.Context, vg, out, bin string, c cgCase, n int, env []string) (int64, error) {
	cmd := exec.CommandContext(ctx, vg, "--tool=callgrind", "--callgrind-out-file="+out,
		bin, "-test.run=^$", "-test.bench="+c.bench, "-test.count=1", "-test.benchtime="+strconv.Itoa(n)+"x", "-test.timeout=10m")
	// cpu.rdtscp=off: valgrind cannot run RDTSCP, which the runtime's
	// cputicks uses when one of its locks goes to sleep (rare, so a run
	// failed now and then with SIGILL, exit status 2); without it cputicks
	// uses RDTSC.
	cmd.Env = append(append([]string(nil), env...), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOMAXPROCS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	o, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, lastLines(o, 5))
	}
	if !strings.Contains(string(o), "\nBenchmark") && !strings.HasPrefix(string(o), "Benchmark") {
		return 0, fmt.Errorf("no benchmark ran: %s", lastLines(o, 5))
	}
	return callgrindTotal(out)
}

// callgrindTotal reads the instructions collected from a callgrind output file
// (its "summary:" line, or "totals:").
func callgrindTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"summary:", "totals:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				f := strings.Fields(v)
				if len(f) == 0 {
					return 0, fmt.Errorf("%s: empty %s line", path, p)
				}
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no summary line", path)
}
