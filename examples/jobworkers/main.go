// Command jobworkers runs worker processes that share one start rate and one
// concurrency cap through Redis: each is a bulkhead.Workers whose Pace is the
// fleet-wide Redis queue and whose Gate is a distsem semaphore, so together
// they start at most -rate jobs a second and run at most -cap at once.
//
//	go run ./examples/jobworkers -workers 3            # starts 3 worker processes
//	go run ./examples/jobworkers -role worker          # or one per terminal
//	go run ./examples/jobworkers -role worker -metrics 127.0.0.1:9464 -d 1m
//
// With -metrics, a worker serves GET /metrics through OpenTelemetry's
// Prometheus exporter (docs/metrics.md): its Workers (floodgate_limiter="workers",
// per floodgate_class), the fleet cap ("running", a distsem) and the start
// schedule ("starts", the Redis queue), as this process sees them.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/examples/internal/examplemetrics"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/redis/go-redis/v9"
)

var (
	redisAddr = flag.String("redis", examplekit.EnvOr("REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env REDIS_ADDR)")
	role      = flag.String("role", "parent", `"parent" starts -workers worker processes; "worker" is one of them`)
	workers   = flag.Int("workers", 3, "worker processes to start (role parent)")
	rate      = flag.Int64("rate", 10, "job starts per second, for the whole fleet")
	limit     = flag.Int64("cap", 4, "jobs running at once, for the whole fleet")
	work      = flag.Duration("job", 200*time.Millisecond, "how long one job runs")
	dur       = flag.Duration("d", 5*time.Second, "how long to submit jobs")
	name      = flag.String("name", "jobworkers", "name of the shared rate and cap in Redis")
	metrics   = flag.String("metrics", "", "role worker: serve GET /metrics (Prometheus) on this address, e.g. 127.0.0.1:9464")
)

func main() {
	flag.Parse()
	redis.SetLogger(examplekit.Quiet{})
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

// worker submits jobs for -d, as fast as its backlog takes them, then drains.
// Its last line is "worker PID started N first=UNIXNANO last=UNIXNANO".
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
	pace := newPace(rdb)
	defer pace.Close()
	dcfg := distsem.Config{}
	wcfg := bulkhead.WorkersConfig{
		Classes: []bulkhead.Class{{Name: "export", MaxQueue: 5}},
		Pace:    pace,
	}
	if m != nil {
		dcfg = m.DistsemConfig("running", dcfg)
		wcfg = m.WorkersConfig("workers", wcfg)
	}
	gate := distsem.New(rdb, *name+":running", *limit, dcfg)
	defer gate.Close()
	wcfg.Gate = gate
	w := bulkhead.NewWorkers(*limit, wcfg)
	if m != nil {
		_, err1 := m.RedisQueue("starts", pace)
		_, err2 := m.Distsem("running", gate)
		_, err3 := m.Workers("workers", w)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
	}
	var started atomic.Int64
	var first, last atomic.Int64
	end := time.After(*dur)
loop:
	for {
		err := w.Submit(ctx, "export", func(ctx context.Context) error {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			started.Add(1)
			select {
			case <-time.After(*work):
			case <-ctx.Done():
			}
			return nil
		})
		var wait time.Duration
		if re, ok := errors.AsType[*bulkhead.RejectError](err); ok {
			wait = re.RetryAfter() // backlog full: come back when a slot is due
		} else if err != nil {
			break
		}
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-time.After(wait):
		}
	}
	sctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := w.Shutdown(sctx); err != nil {
		return err
	}
	fmt.Printf("worker %d started %d first=%d last=%d\n", os.Getpid(), started.Load(), first.Load(), last.Load())
	return nil
}

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
	fmt.Printf("starting %d workers sharing %d/s and %d at once through Redis at %s\n", *workers, *rate, *limit, *redisAddr)
	var mu sync.Mutex
	var total, first, last int64
	var wg sync.WaitGroup
	errs := make([]error, *workers)
	for i := range *workers {
		cmd := exec.Command(self, "-role", "worker", "-redis", *redisAddr, "-rate", fmt.Sprint(*rate),
			"-cap", fmt.Sprint(*limit), "-job", work.String(), "-d", dur.String(), "-name", *name)
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
	return nil
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
