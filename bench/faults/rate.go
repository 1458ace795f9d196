package main

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/go-redis/redis_rate/v10"
	thr "github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
)

// source says who decided a call.
type source uint8

const (
	srcStore    source = iota // Redis
	srcDegraded               // floodgate's policy, Redis not asked (Decision.Degraded)
	srcError                  // an error reached the caller
)

// decision is what one call of a rate limit gave its caller.
type decision struct {
	allowed bool // admitted (for a peer's error: false; see rateWindow.errs)
	src     source
	// remaining and reset are the fixed window's answer from Redis (-1
	// otherwise): Redis's count in the window is L - remaining, and the
	// window ends reset after Redis decided.
	remaining int64
	reset     time.Duration
}

// rateRec is one decision as the harness saw it.
type rateRec struct {
	proc       int
	state      breaker.State // the process's breaker when the call began (closed for peers)
	start, end time.Time
	d          decision
}

// rateProc is one process's limiter.
type rateProc struct {
	decide func(ctx context.Context) decision
	br     *breaker.Breaker // nil for a peer
	budget time.Duration    // the deadline of each call's context
	// carried reads the meter's Stats().Carried (nil for a peer: it
	// carries nothing).
	carried func() int64
}

// newRateProcs makes each process's limiter for e's subject: every
// process has its own client (through its own proxy), breaker and limiter
// object, on one shared key.
func newRateProcs(e *env) []rateProc {
	L := e.p.limit
	share := L / int64(e.p.procs) // LocalShare = L / processes, as documented
	procs := make([]rateProc, e.p.procs)
	for i := range procs {
		client := e.clients[i]
		switch e.sc.subj {
		case fgWindow, fgGCRA:
			cfg := shaperredis.Config{Prefix: "faults:", Breaker: e.brs[i], Policy: e.sc.policy}
			var m *shaperredis.Meter
			if e.sc.subj == fgWindow {
				cfg.LocalShare = shaper.Limit{Rate: shaper.PerSecond(share)}
				m = shaperredis.NewFixedWindow(client, shaper.Limit{Rate: shaper.PerSecond(L)}, cfg)
			} else {
				cfg.LocalShare = shaper.Limit{Rate: shaper.PerSecond(share), Burst: share}
				m = shaperredis.NewMeter(client, shaper.Limit{Rate: shaper.PerSecond(L), Burst: L}, cfg)
			}
			window := e.sc.subj == fgWindow
			procs[i] = rateProc{br: e.brs[i], budget: time.Second, carried: func() int64 { return int64(m.Stats().Carried) }, decide: func(ctx context.Context) decision {
				d, err := m.AllowN(ctx, "fleet", 1)
				switch {
				case err != nil:
					return decision{src: srcError, remaining: -1}
				case d.Degraded:
					return decision{allowed: d.Allowed, src: srcDegraded, remaining: -1}
				case window:
					return decision{allowed: d.Allowed, src: srcStore, remaining: d.Remaining, reset: d.ResetAfter}
				}
				return decision{allowed: d.Allowed, src: srcStore, remaining: -1}
			}}
		case redisRate:
			rl := redis_rate.NewLimiter(client)
			lim := redis_rate.Limit{Rate: int(L), Burst: int(L), Period: time.Second}
			procs[i] = rateProc{budget: e.p.callTO, decide: func(ctx context.Context) decision {
				r, err := rl.Allow(ctx, "faults:rr:fleet", lim)
				if err != nil {
					return decision{src: srcError, remaining: -1}
				}
				return decision{allowed: r.Allowed > 0, remaining: -1}
			}}
		case throttled:
			st, err := goredisstore.NewCtx(client, "faults:th:")
			if err != nil {
				panic(err) // NewCtx returns no error
			}
			th, err := thr.NewGCRARateLimiterCtx(st, thr.RateQuota{MaxRate: thr.PerSec(int(L)), MaxBurst: int(L) - 1})
			if err != nil {
				panic(fmt.Sprintf("throttled: %v", err))
			}
			procs[i] = rateProc{budget: e.p.callTO, decide: func(ctx context.Context) decision {
				limited, _, err := th.RateLimitCtx(ctx, "fleet", 1)
				if err != nil {
					return decision{src: srcError, remaining: -1}
				}
				return decision{allowed: !limited, remaining: -1}
			}}
		}
	}
	return procs
}

// rateLoad offers decisions and records them.
type rateLoad struct {
	load[rateRec]
	procs []rateProc
}

// run offers rate decisions a second from every process during [from,
// until) (see load.offer).
func (l *rateLoad) run(ctx context.Context, from, until time.Time, rate float64) {
	l.offer(ctx, len(l.procs), from, until, rate, func(i int) rateRec { return l.procs[i].one(i) })
}

// one makes one decision of process i.
func (pr *rateProc) one(i int) rateRec {
	ctx, cancel := context.WithTimeout(context.Background(), pr.budget)
	defer cancel()
	st := breaker.StateClosed
	if pr.br != nil {
		st = pr.br.State()
	}
	start := time.Now()
	d := pr.decide(ctx)
	return rateRec{proc: i, state: st, start: start, end: time.Now(), d: d}
}
