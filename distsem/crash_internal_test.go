package distsem

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	crashAddr = "DISTSEM_CRASH_ADDR"
	crashName = "DISTSEM_CRASH_NAME"
)

// The fleet of TestCrashedProcessTakesOnlyWhatItHeld: limit 10, 10s leases,
// 20 goroutines per process holding 0–20ms each.
const (
	crashLimit = 10
	crashLease = 10 * time.Second
	crashPer   = 20
	crashHold  = 20 * time.Millisecond
)

// crashLoop makes per goroutines acquire 1, hold it up to crashHold and
// release it until ctx ends; granted and released are called around each
// hold.
func crashLoop(ctx context.Context, s *Semaphore, per int, granted, released func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range per {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					continue
				}
				granted()
				time.Sleep(time.Duration(r.Int64N(int64(crashHold))))
				released()
				p.Release(context.Background())
			}
		})
	}
	return &wg
}

// TestHelperCrashingProcess is not a test: run as a child process by
// TestCrashedProcessTakesOnlyWhatItHeld, it prints its Semaphore's id, then
// runs the fleet's workload, printing "+" after each grant and "-" before each
// release, until it is killed (at most a minute).
func TestHelperCrashingProcess(t *testing.T) {
	addr := os.Getenv(crashAddr)
	if addr == "" {
		t.Skip("helper process for TestCrashedProcessTakesOnlyWhatItHeld")
	}
	rdb := redis.NewClient(redistest.Options(addr))
	s := New(rdb, os.Getenv(crashName), crashLimit, Config{Lease: crashLease})
	fmt.Println("ID", s.id)
	var mu sync.Mutex
	line := func(b []byte) func() {
		return func() { mu.Lock(); os.Stdout.Write(b); mu.Unlock() }
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crashLoop(ctx, s, crashPer, line([]byte("+\n")), line([]byte("-\n"))).Wait()
	os.Exit(1)
}

// TestCrashedProcessTakesOnlyWhatItHeld: three processes share a semaphore
// and one of them is SIGKILLed mid-run. Its queued waiters kept being granted
// by hand-off, and those grants stayed out for a whole lease, stalling the
// survivors; now only the weight it held stays out, everything handed to its
// waiters is back within WaiterTTL, and the survivors' throughput recovers
// within that bound.
func TestCrashedProcessTakesOnlyWhatItHeld(t *testing.T) {
	db := redistest.Connect(t)
	name := db.Prefix + "sem"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashingProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashAddr+"="+db.Client.Options().Addr, crashName+"="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	// The child's held weight, as it reported it; its id; EOF once it died.
	var childHeld, childGrants atomic.Int64
	ids := make(chan string, 1)
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); {
			case l == "+":
				childHeld.Add(1)
				childGrants.Add(1)
			case l == "-":
				childHeld.Add(-1)
			case strings.HasPrefix(l, "ID "):
				ids <- strings.TrimPrefix(l, "ID ")
			}
		}
	}()
	var childID string
	select {
	case childID = <-ids:
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not start within 20s")
	}

	// Two surviving processes.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	var grants []time.Time
	var wgs []*sync.WaitGroup
	var survivors []*Semaphore
	for range 2 {
		cl := redis.NewClient(redistest.Options(db.Client.Options().Addr))
		t.Cleanup(func() { cl.Close() })
		s := New(cl, name, crashLimit, Config{Lease: crashLease})
		t.Cleanup(func() { s.Close() })
		survivors = append(survivors, s)
		wgs = append(wgs, crashLoop(ctx, s, crashPer, func() {
			mu.Lock()
			grants = append(grants, time.Now())
			mu.Unlock()
		}, func() {}))
	}
	defer func() {
		stop()
		for _, wg := range wgs {
			wg.Wait()
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); childGrants.Load() < 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child made fewer than 100 grants in 20s")
		}
	}
	time.Sleep(500 * time.Millisecond) // the three run together

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-eof
	held := childHeld.Load()
	bound := survivors[0].cfg.WaiterTTL

	// Past the bound, only what the child held is still out.
	time.Sleep(time.Until(killed.Add(bound + 500*time.Millisecond)))
	rdb := db.Client
	keys := survivors[0].keys
	toks, err := rdb.ZRangeWithScores(t.Context(), keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var dead int64
	for _, z := range toks {
		tok := z.Member.(string)
		if strings.HasPrefix(tok, childID+".") {
			w, err := rdb.HGet(t.Context(), keys[4], "w:"+tok).Result()
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseInt(w, 10, 64)
			dead += n
		}
	}
	// The child may have been killed between a grant and its "+" line: one
	// permit of slack.
	if dead > held+1 {
		t.Errorf("%v after SIGKILL the dead process still has %d of %d at the store, but held %d when killed", time.Since(killed).Round(time.Millisecond), dead, crashLimit, held)
	} else {
		t.Logf("%v after SIGKILL the dead process has %d at the store; it held %d when killed", time.Since(killed).Round(time.Millisecond), dead, held)
	}

	// The survivors' throughput recovers within the bound.
	time.Sleep(time.Until(killed.Add(bound + 2500*time.Millisecond)))
	end := time.Now()
	mu.Lock()
	after := slices.Clone(grants)
	mu.Unlock()
	gap, last := time.Duration(0), killed
	recovered := 0
	for _, g := range after {
		if g.Before(killed) {
			continue
		}
		gap = max(gap, g.Sub(last))
		last = g
		if g.After(killed.Add(bound + 500*time.Millisecond)) {
			recovered++
		}
	}
	gap = max(gap, end.Sub(last))
	t.Logf("after SIGKILL: longest stall of the survivors %v; %d grants in the last 2s", gap.Round(time.Millisecond), recovered)
	if gap > bound+750*time.Millisecond {
		t.Errorf("survivors made no acquisition for %v after the SIGKILL, want ≤ WaiterTTL + 750ms = %v", gap.Round(time.Millisecond), bound+750*time.Millisecond)
	}
	if recovered < 50 {
		t.Errorf("survivors made %d acquisitions from WaiterTTL + 500ms to WaiterTTL + 2.5s after the SIGKILL, want ≥ 50", recovered)
	}
}
