package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/redis/go-redis/v9"
)

// env is the world of one scenario: its own redis-server (and, for a
// failover, a replica behind a proxy of its own), and for each process of
// the fleet a Proxy in front of Redis, a go-redis client dialing that proxy
// and a breaker. Every process is a set of goroutines of this OS process
// with objects of its own: nothing but the redis-server is shared.
type env struct {
	sc      scenario
	p       params
	primary *redisproc.Server
	replica *redisproc.Server    // failover only
	repl    *floodgatetest.Proxy // the replica's link to the primary (failover only)
	proxies []*floodgatetest.Proxy
	clients []*redis.Client
	brs     []*breaker.Breaker // floodgate subjects only
	cal     *calendar          // shared by the runs at once; nil: faults begin when due
	notes   []string
}

// quiet is the breakers' and semaphores' logger: the harness reads their
// state, and ten processes logging each transition would bury the output.
var quiet = slog.New(slog.DiscardHandler)

func newEnv(ctx context.Context, sc scenario, p params, bin, dir string) (e *env, err error) {
	e = &env{sc: sc, p: p}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	pdir, err := dirFor(dir, "primary")
	if err != nil {
		return nil, err
	}
	if e.primary, err = redisproc.Start(ctx, bin, pdir); err != nil {
		return nil, err
	}
	if sc.fault == failover {
		if e.repl, err = floodgatetest.NewProxy(e.primary.Addr()); err != nil {
			return nil, err
		}
		host, port, _ := strings.Cut(e.repl.Addr(), ":")
		rdir, err := dirFor(dir, "replica")
		if err != nil {
			return nil, err
		}
		if e.replica, err = redisproc.Start(ctx, bin, rdir, "--replicaof", host, port); err != nil {
			return nil, err
		}
		if err := waitLinkUp(ctx, e.replica); err != nil {
			return nil, err
		}
	}
	for range p.procs {
		px, err := floodgatetest.NewProxy(e.primary.Addr())
		if err != nil {
			return nil, err
		}
		e.proxies = append(e.proxies, px)
		e.clients = append(e.clients, redis.NewClient(&redis.Options{
			Addr: px.Addr(), ContextTimeoutEnabled: true, DisableIdentity: true,
		}))
		if !sc.subj.peer() {
			e.brs = append(e.brs, breaker.New("redis", breaker.Config{CallTimeout: p.callTO, Logger: quiet}))
		}
	}
	return e, nil
}

// connect pings Redis through every process's client, so that each has a
// connection before anything is measured. Errors are left to the run.
func (e *env) connect(ctx context.Context) {
	for _, c := range e.clients {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		c.Ping(pctx)
		cancel()
	}
}

// waitLinkUp waits until the replica has synchronised with its primary.
func waitLinkUp(ctx context.Context, s *redisproc.Server) error {
	rdb := s.Admin()
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil && infoField(info, "master_link_status") == "up" {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling a child's state
	}
	return errors.New("replica did not synchronise within 10s")
}

func (e *env) close() {
	for _, c := range e.clients {
		c.Close()
	}
	for _, px := range e.proxies {
		px.Close()
	}
	if e.repl != nil {
		e.repl.Close()
	}
	if e.replica != nil {
		e.replica.Kill()
	}
	if e.primary != nil {
		e.primary.Kill()
	}
}

// inject puts the scenario's fault in place, waits for its length, takes it
// away and returns when Redis is back: returned is that moment. It must be
// called once, at the fault's start.
func (e *env) inject(ctx context.Context) (returned time.Time, err error) {
	p := e.p
	switch e.sc.fault {
	case frozen:
		e.primary.Pause()
		sleepCtx(ctx, p.outage)
		e.primary.Resume()
	case restarted:
		e.primary.Kill()
		sleepCtx(ctx, p.down)
		if err := e.primary.Restart(ctx); err != nil {
			return time.Time{}, err
		}
	case failover:
		e.repl.Freeze() // the replica stops receiving the primary's writes
		sleepCtx(ctx, p.lag)
		lag := e.replLag(ctx)
		e.primary.Kill()
		adm := e.replica.Admin()
		err := adm.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
		adm.Close()
		if err != nil {
			return time.Time{}, fmt.Errorf("promoting the replica: %w", err)
		}
		for _, px := range e.proxies {
			px.SetTarget(e.replica.Addr())
			px.Reset()
		}
		e.notes = append(e.notes, fmt.Sprintf("replica promoted %d bytes of replication stream behind its primary", lag))
	case partition:
		e.proxies[0].Freeze()
		sleepCtx(ctx, p.outage)
		e.proxies[0].Heal()
	case slow:
		// Delay applies to each direction: a round trip takes 2 × CallTimeout
		// more, so a request reaches Redis as its call's timeout ends.
		for _, px := range e.proxies {
			px.Delay(p.callTO)
		}
		sleepCtx(ctx, p.outage)
		for _, px := range e.proxies {
			px.Heal()
		}
	}
	return time.Now(), ctx.Err()
}

// replLag returns how far (bytes of replication stream) the replica is behind
// the primary; -1 if unknown.
func (e *env) replLag(ctx context.Context) int64 {
	off := func(s *redisproc.Server, field string) int64 {
		rdb := s.Admin()
		defer rdb.Close()
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return -1
		}
		n, err := strconv.ParseInt(infoField(info, field), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	p, r := off(e.primary, "master_repl_offset"), off(e.replica, "master_repl_offset")
	if p < 0 || r < 0 {
		return -1
	}
	return p - r
}

// infoField returns the value of key in an INFO reply.
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// sleepUntil sleeps until t or ctx is done.
func sleepUntil(ctx context.Context, t time.Time) { sleepCtx(ctx, time.Until(t)) }

// nextSecond returns the first whole second of Unix time after t plus
// margin: windows of the limits are aligned to the Unix epoch.
func nextSecond(t time.Time, margin time.Duration) time.Time {
	return t.Add(margin).Truncate(time.Second).Add(time.Second)
}

// dirFor makes a directory for a server of a scenario under root.
func dirFor(root, name string) (string, error) {
	d := filepath.Join(root, name)
	return d, os.MkdirAll(d, 0o755)
}
