// Command jobworkers is the README's job 2: worker processes that share one
// start rate and one concurrency cap through Redis. Each is a bulkhead.Workers
// whose Pace is the fleet-wide Redis queue and whose Gate is a distsem
// semaphore, so together they start at most -rate jobs a second (5) and run
// at most -cap at once (8). Each has two classes: "interactive" (2 of its 8
// slots reserved, a backlog of 100) and "background" (a backlog of 1000). Every
// worker submits background jobs at -background a second and an interactive
// one every -interactive; interactive jobs start first, and background jobs
// never hold a worker's last 2 slots. On shutdown the backlog drains.
//
//	go -C examples run ./jobworkers -workers 3            # starts 3 worker processes
//	go -C examples run ./jobworkers -role worker          # or one per terminal
//	go -C examples run ./jobworkers -metrics 127.0.0.1:9464 -d 1m
//
// With -metrics, each worker serves GET /metrics through OpenTelemetry's
// Prometheus exporter (docs/metrics.md): its Workers (floodgate_limiter="workers",
// per floodgate_part), the fleet cap ("running", a distsem) and the start
// schedule ("starts", the Redis queue), as this process sees them. Started by
// the parent, worker i serves on the port -metrics gives plus i (port 0: each
// its own free port); every worker prints its address.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/examples/internal/examplemetrics"
	"github.com/redis/go-redis/v9"
)

var (
	redisAddr = flag.String("redis", examplekit.EnvOr("REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env REDIS_ADDR)")
	role      = flag.String("role", "parent", `"parent" starts -workers worker processes; "worker" is one of them`)
	workers   = flag.Int("workers", 3, "worker processes to start (role parent)")
	rate      = flag.Int64("rate", defaultRate, "job starts per second, for the whole fleet")
	limit     = flag.Int64("cap", defaultCap, "jobs running at once, for the whole fleet (and in each worker)")
	work      = flag.Duration("job", 2*time.Second, "how long one job runs")
	dur       = flag.Duration("d", 5*time.Second, "how long to submit jobs")
	bgRate    = flag.Float64("background", 2, "background jobs each worker submits per second")
	every     = flag.Duration("interactive", time.Second, "each worker submits an interactive job this often")
	name      = flag.String("name", "jobworkers", "name of the shared rate and cap in Redis")
	metrics   = flag.String("metrics", "", "serve GET /metrics (Prometheus) on this address, e.g. 127.0.0.1:9464; the parent gives worker i this port + i")
)

// The README's job 2: 5 starts a second and 8 at once across the fleet; the
// interactive class has 2 of the 8 reserved and a backlog of 100, the
// background class a backlog of 1000.
const (
	defaultRate, defaultCap = 5, 8
	reserved                = 2
	interactiveQueue        = 100
	backgroundQueue         = 1000
)

// classes are the priority classes, highest first.
var classes = []bulkhead.WorkerClass{
	{Name: "interactive", Reserved: reserved, MaxQueue: interactiveQueue}, // background can never take these 2
	{Name: "background", MaxQueue: backgroundQueue},
}

func main() {
	flag.Parse()
	redis.SetLogger(examplekit.Quiet{})
	if *limit <= reserved || *bgRate <= 0 || *every <= 0 {
		fmt.Fprintf(os.Stderr, "jobworkers: -cap must be above the %d reserved for interactive jobs, -background and -interactive positive\n", reserved)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *role == "worker" {
		err = worker(ctx)
	} else {
		err = parent(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobworkers:", err)
		os.Exit(1)
	}
}

// worker submits jobs for -d, then drains. Its last line is
// "worker PID started N first=UNIXNANO last=UNIXNANO" followed by, per class,
// "CLASS started=N peak=N maxwait=DURATION".
func worker(ctx context.Context) error {
	rdb, err := connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	m, stopMetrics, err := examplemetrics.Serve(*metrics, os.Stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	pace := newPace(rdb, examplemetrics.Observer(m, "starts"))
	defer pace.Close()
	gate := distsem.New(rdb, *name+":running", *limit, distsem.Config{Observer: examplemetrics.Observer(m, "running")})
	defer gate.Close()
	w := bulkhead.NewWorkers(*limit, bulkhead.WorkersConfig{
		Classes: classes, Pace: pace, Gate: gate, Observer: examplemetrics.Observer(m, "workers"),
	})
	var started atomic.Int64
	var first, last atomic.Int64
	peaks := map[string]*gauge{}
	for _, c := range classes {
		peaks[c.Name] = new(gauge)
	}
	job := func(class string) func(context.Context) error {
		return func(ctx context.Context) error {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			started.Add(1)
			g := peaks[class]
			g.enter()
			defer g.leave()
			examplekit.Sleep(ctx, *work)
			return nil
		}
	}
	bg := time.NewTicker(time.Duration(float64(time.Second) / *bgRate))
	defer bg.Stop()
	ia := time.NewTicker(*every)
	defer ia.Stop()
	end := time.After(*dur)
loop:
	for {
		class := "background"
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-bg.C:
		case <-ia.C:
			class = "interactive"
		}
		// A refusal (backlog full) would be a message left on the broker
		// for later; here it is dropped.
		if err := w.Submit(ctx, class, bulkhead.Job{Run: job(class), Value: class}); err != nil && !errors.Is(err, bulkhead.ErrQueueFull) {
			break
		}
	}
	sctx, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := w.Shutdown(sctx); err != nil {
		return err
	}
	line := fmt.Sprintf("worker %d started %d first=%d last=%d", os.Getpid(), started.Load(), first.Load(), last.Load())
	st := w.Stats()
	for _, c := range st.Classes {
		line += fmt.Sprintf(" %s started=%d peak=%d maxwait=%v", c.Name, c.Started, peaks[c.Name].max.Load(), c.MaxQueueDelay.Round(time.Millisecond))
	}
	fmt.Println(line)
	return nil
}

// gauge tracks how many run at once and the most seen.
type gauge struct{ cur, max atomic.Int64 }

func (g *gauge) enter() {
	n := g.cur.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
}

func (g *gauge) leave() { g.cur.Add(-1) }

// parent starts -workers copies of this program as workers and sums up.
func parent(ctx context.Context) error {
	rdb, err := connect(ctx) // one clear message rather than one per worker
	if err != nil {
		return err
	}
	rdb.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("starting %d workers sharing %d/s and %d at once through Redis at %s; in each, %d of the %d are reserved for interactive jobs\n",
		*workers, *rate, *limit, *redisAddr, reserved, *limit)
	var mu sync.Mutex
	var total, first, last int64
	sum := map[string]*classSum{}
	for _, c := range classes {
		sum[c.Name] = &classSum{}
	}
	var wg sync.WaitGroup
	errs := make([]error, *workers)
	for i := range *workers {
		args := []string{"-role", "worker", "-redis", *redisAddr, "-rate", fmt.Sprint(*rate),
			"-cap", fmt.Sprint(*limit), "-job", work.String(), "-d", dur.String(), "-name", *name,
			"-background", fmt.Sprint(*bgRate), "-interactive", every.String()}
		if *metrics != "" {
			addr, err := nthAddr(*metrics, i)
			if err != nil {
				return err
			}
			args = append(args, "-metrics", addr)
		}
		cmd := exec.Command(self, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { cmd.Process.Signal(os.Interrupt) })
		wg.Go(func() {
			defer stop()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				fmt.Println(line)
				var pid, n, f, l int64
				if _, err := fmt.Sscanf(line, "worker %d started %d first=%d last=%d", &pid, &n, &f, &l); err == nil && n > 0 {
					mu.Lock()
					total += n
					if first == 0 || f < first {
						first = f
					}
					last = max(last, l)
					for _, m := range classRE.FindAllStringSubmatch(line, -1) {
						if c := sum[m[1]]; c != nil {
							n, _ := strconv.ParseInt(m[2], 10, 64)
							p, _ := strconv.ParseInt(m[3], 10, 64)
							d, _ := time.ParseDuration(m[4])
							c.started += n
							c.peak = max(c.peak, p)
							c.maxWait = max(c.maxWait, d)
						}
					}
					mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("worker %d: %v", i+1, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	r := 0.0
	if total > 1 && last > first {
		r = float64(total-1) / time.Duration(last-first).Seconds()
	}
	fmt.Printf("fleet started %d jobs at %s/s (limit %d/s)\n", total, strconv.FormatFloat(r, 'f', 1, 64), *rate)
	for _, c := range classes {
		s := sum[c.Name]
		limitNote := ""
		if c.Name == "background" {
			limitNote = fmt.Sprintf(" (at most %d of %d: %d are reserved)", *limit-reserved, *limit, reserved)
		}
		fmt.Printf("%s: %d started, longest wait in the backlog %v, at most %d running in one worker%s\n",
			c.Name, s.started, s.maxWait, s.peak, limitNote)
	}
	return nil
}

// classRE reads a class's counts in a worker's last line.
var classRE = regexp.MustCompile(`(\w+) started=(\d+) peak=(\d+) maxwait=(\S+)`)

// classSum sums a class over the workers.
type classSum struct {
	started, peak int64
	maxWait       time.Duration
}

// nthAddr returns addr with its port plus i (port 0 stays 0: any free port).
func nthAddr(addr string, i int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-metrics %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("-metrics %q: port %q is not a number", addr, port)
	}
	if p != 0 {
		p += i
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

func connect(ctx context.Context) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second})
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s is unreachable (%v); start one or set -redis / REDIS_ADDR", *redisAddr, err)
	}
	return rdb, nil
}
