package floodgatetest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// serve starts a line server on loopback that answers every line with
// prefix and the line; stop closes it and waits for it.
func serve(prefix string) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					io.WriteString(c, prefix+line)
				}
			})
		}
	})
	return ln.Addr().String(), func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// A Proxy between a client and its server: frozen, the client's call waits
// (here, until its read deadline); healed, the stream goes on where it
// stopped.
func ExampleProxy() {
	server, stop := serve("echo: ")
	defer stop()
	p, err := floodgatetest.NewProxy(server)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr()) // the client dials the proxy
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ask := func(line string) {
		fmt.Fprintln(c, line)
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		answer, err := r.ReadString('\n')
		if errors.Is(err, os.ErrDeadlineExceeded) {
			fmt.Println("no answer within 200ms")
			return
		}
		fmt.Print(answer)
	}

	ask("one")
	p.Freeze()
	ask("two") // held by the proxy
	p.Heal()
	c.SetReadDeadline(time.Time{})
	answer, _ := r.ReadString('\n') // "two" arrives after all
	fmt.Print(answer)
	ask("three")
	// Output:
	// echo: one
	// no answer within 200ms
	// echo: two
	// echo: three
}

// Failover: SetTarget sends new connections to the replica, and Reset ends
// the old ones, so that every client reconnects there.
func ExampleProxy_SetTarget() {
	primary, stop1 := serve("primary: ")
	defer stop1()
	replica, stop2 := serve("replica: ")
	defer stop2()
	p, err := floodgatetest.NewProxy(primary)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	ask := func(line string) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			panic(err)
		}
		defer c.Close()
		fmt.Fprintln(c, line)
		answer, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(answer)
	}
	ask("before")
	p.SetTarget(replica)
	p.Reset()
	ask("after")
	// Output:
	// primary: before
	// replica: after
}

// A fleet of four pods, three callers each, against a concurrency bound of
// 3: with one semaphore that they share (as a distsem.Semaphore is shared
// through Redis) the bound holds; with a semaphore per pod, the mistake of
// a per-process limit for a fleet-wide cap, it does not.
func ExampleNoOverAdmission() {
	ctx := context.Background()
	load := floodgatetest.Load{Duration: 200 * time.Millisecond, Hold: 10 * time.Millisecond}
	bound := floodgatetest.Bound{Concurrent: 3}

	shared := semaphore.New(3, semaphore.Config{})
	fleet := floodgatetest.Fleet{Pods: 4, Callers: 3, New: func(pod int) floodgatetest.Runner {
		return floodgatetest.GateRunner(shared, 1)
	}}
	rep, err := floodgatetest.NoOverAdmission(ctx, fleet, load, bound)
	fmt.Println("shared:", rep.MaxConcurrent, "at most at once;", err)

	perPod := floodgatetest.Fleet{Pods: 4, Callers: 3, New: func(pod int) floodgatetest.Runner {
		return floodgatetest.GateRunner(semaphore.New(3, semaphore.Config{}), 1)
	}}
	rep, err = floodgatetest.NoOverAdmission(ctx, perPod, load, bound)
	v, _ := errors.AsType[*floodgatetest.Violation](err)
	fmt.Println("per pod: more than 3 at once:", rep.MaxConcurrent > 3, "; violation of", v.Check)
	// Output:
	// shared: 3 at most at once; <nil>
	// per pod: more than 3 at once: true ; violation of NoOverAdmission
}

// The bound of a GCRA meter over one second: its burst, and its rate for
// the second.
func ExampleRateBound() {
	lim := shaper.Limit{Rate: shaper.PerSecond(50), Burst: 10}
	fmt.Println(floodgatetest.RateBound(lim, time.Second))
	fmt.Println(floodgatetest.RateBound(lim, 100*time.Millisecond))
	// Output:
	// 60
	// 15
}

// A meter's refusals say when to retry, and a retry then is admitted; a
// RetryAfter halved on the way (a proxy that rewrites it, a rounding down)
// sends the retry too early.
func ExampleHonestRetryAfter() {
	ctx := context.Background()
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(50), Burst: 2})
	rep, err := floodgatetest.HonestRetryAfter(ctx, floodgatetest.RateRunner(m, "k", 1), floodgatetest.RetryCheck{Rounds: 3})
	fmt.Println(rep.Rounds, "refusals checked:", err)

	lying := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(50), Burst: 2})
	halved := func(ctx context.Context, fn func(context.Context) error) error {
		d, err := lying.Admit(ctx, "k", 1)
		if err != nil {
			d.RetryAfter /= 2
			return d.Err()
		}
		return fn(ctx)
	}
	_, err = floodgatetest.HonestRetryAfter(ctx, halved, floodgatetest.RetryCheck{})
	_, isViolation := errors.AsType[*floodgatetest.Violation](err)
	fmt.Println("halved RetryAfter caught:", isViolation)
	// Output:
	// 3 refusals checked: <nil>
	// halved RetryAfter caught: true
}

// forgetful is a gate that loses every tenth release.
type forgetful struct {
	*semaphore.Weighted
	n int
	sync.Mutex
}

func (f *forgetful) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	h, err := f.Weighted.Hold(ctx, n)
	if err != nil {
		return h, err
	}
	return f.wrap(h), nil
}

func (f *forgetful) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	h, err := f.Weighted.TryHold(ctx, n)
	if err != nil {
		return h, err
	}
	return f.wrap(h), nil
}

func (f *forgetful) wrap(h floodgate.Held) floodgate.Held {
	return floodgate.NewHeld(h.Context(), func(_ string, n int64) {
		f.Lock()
		f.n++
		lose := f.n%10 == 0
		f.Unlock()
		if !lose {
			f.Release(n)
		}
	}, "", h.N())
}

// Random holds, cancellations and releases on a semaphore leave it whole; a
// gate that loses releases is caught.
func ExamplePermitsBalance() {
	ctx := context.Background()
	sem := semaphore.New(4, semaphore.Config{})
	cfg := floodgatetest.BalanceCheck{Limit: 4, MaxN: 2, Ops: 50, InUse: func() int64 { return sem.Stats().InUse }}
	_, err := floodgatetest.PermitsBalance(ctx, sem, cfg)
	fmt.Println("semaphore:", err)

	leaky := &forgetful{Weighted: semaphore.New(4, semaphore.Config{})}
	cfg.InUse = func() int64 { return leaky.Stats().InUse }
	_, err = floodgatetest.PermitsBalance(ctx, leaky, cfg)
	_, isViolation := errors.AsType[*floodgatetest.Violation](err)
	fmt.Println("losing releases caught:", isViolation)
	// Output:
	// semaphore: <nil>
	// losing releases caught: true
}
