package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// writeReport writes rep as Markdown.
func writeReport(w io.Writer, rep *report) {
	pf := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	pf("# Fleet limits under faults\n\n")
	pf("Written by `make faults` (`cd bench && go run ./faults`")
	if rep.quick {
		pf(" -quick: short phases, one scenario, **not for publishing**")
	}
	pf(") on %s UTC in %s: %d cores (%s), load average %s at the start and %s at the end, "+
		"nice %s, redis-server %s, %d scenarios %d at a time, each on redis-servers of its own.\n\n",
		rep.start.UTC().Format("2006-01-02 15:04"), rep.end.Sub(rep.start).Round(time.Second),
		runtime.NumCPU(), cpuModel(), rep.loadStart, rep.loadEnd, rep.nice, rep.redisVersion, len(rep.results), rep.parallel)
	writeHow(w, rep)
	writeTargets(w, rep)
	writeCauses(w, rep)
	writeRates(w, rep)
	writeSeries(w, rep)
	writeGates(w, rep)
	var notes []string
	for _, r := range rep.results {
		for _, n := range r.notes {
			notes = append(notes, fmt.Sprintf("%s: %s", r.sc.name(), n))
		}
	}
	if len(notes) > 0 {
		pf("## Notes of the runs\n\n")
		for _, n := range notes {
			pf("- %s\n", n)
		}
		pf("\n")
	}
}

func writeHow(w io.Writer, rep *report) {
	p := rep.p
	share := p.limit / int64(p.procs)
	fmt.Fprintf(w, `## How it is measured

- **The fleet.** %[1]d processes share one limit. A process is a set of goroutines of this one
  OS process with objects of its own: a go-redis client (ContextTimeoutEnabled, go-redis's
  defaults otherwise) that dials a TCP fault proxy of its own (floodgatetest.Proxy) in front of
  Redis, so that one process can be cut off alone; a breaker of its own (breaker.Config{}:
  CallTimeout %[2]s, open after 5 consecutive store failures, open 1 s plus up to 10%% jitter,
  then one half-open probe: the PING its limiter gives a breaker without a Probe, made by the
  breaker off the callers' path); and its own limiter. Nothing is shared but the redis-server, which the
  program starts (no persistence) for each scenario alone; separate OS processes would add
  only the kernel's scheduling.
- **Rates.** L = %[3]d per 1 s window on one key. floodgate's fixed window
  (shaperredis.NewFixedWindow: %[3]d per window, windows aligned to the Unix epoch in Redis's
  clock, which is this machine's), floodgate's GCRA (shaperredis.NewMeter, %[3]d/s, burst %[3]d),
  go-redis/redis_rate v10 (GCRA, %[3]d/s, burst %[3]d) and throttled v2 (GCRA, %[3]d/s,
  MaxBurst %[4]d, that is a burst of %[3]d, on its go-redis v9 store). sethvargo/go-limiter: the
  version the module proxy serves (v0.7.1, the latest) has no Redis store (memorystore and
  noopstore); its README points to a separate module, github.com/sethvargo/go-redisstore,
  which the module proxy here does not serve (403), so it is not measured.
- **Load.** Each process offers %[5]g decisions a second (2·L/N; the fleet 2·L), open loop:
  each call in a goroutine of its own, the processes' arrivals staggered evenly, so that a call
  that blocks does not hold back the next one, as requests to a server do not wait for each
  other. floodgate's calls get a 1 s context (a request's budget; CallTimeout bounds each Redis
  call within it); the peers' calls a %[2]s context, the same bound as floodgate's CallTimeout
  and their only one.
- **Policies.** FailOpen, FailClosed and FailLocal, with LocalShare as documented, L / N: %[6]d
  per window (fixed window), %[6]d/s with a burst of %[6]d (GCRA), %[7]d permits (distsem). The
  peers have no policy: each row is a caller that admits on an error (fails open), and the row
  below it the same run read for a caller that refuses on an error (fails closed).
- **Faults.** Each begins in the middle of a window, %[8]s after the load starts or a few seconds
  later: runs going on at once are spaced so that no two Redis return within 5 s of each other (on
  2 cores, fleets recovering at the same instant slow each other down for seconds). The fleet is
  then watched %[9]s after Redis returns.
  - *Redis frozen*: redis-server SIGSTOPped for %[10]s (connections stay open, calls hang),
    then SIGCONT.
  - *Redis restarted empty*: SIGKILLed, gone %[11]s (connections refused), started again on
    the same port with no data.
  - *Failover*: a replica replicates the primary through a proxy of its own; that proxy is
    frozen so that the replica misses %[12]s of writes, then the primary is killed, the
    replica promoted (REPLICAOF NO ONE), and every process's proxy sent to it (SetTarget) with
    its connections reset. Redis "returns" at the promotion.
  - *One process partitioned*: process 0's proxy frozen for %[10]s; the other processes are fine.
  - *Slow Redis*: for %[10]s every proxy holds each chunk %[2]s in each direction, so that a round
    trip takes 2 × CallTimeout more and a request reaches Redis as its call's timeout ends.
- **Admitted per window.** The fleet's admissions in each whole second of Unix time, as a
  multiple of L: a fixed-window answer from Redis counts in the window Redis counted it in (its
  ResetAfter says which), another answer from Redis at the middle of its call, an answer made in
  the process (a degraded decision; an error that a fail-open caller admits) at its end. The
  first window of a run is left out (a GCRA meter idle until then admits its burst on top of its
  rate there). *max* and *p99* are over every other window of the run, *inside* over the windows
  wholly within the fault, *before* over those before it. *excess*: the admissions an exact limiter
  would have refused: for the fixed window, those beyond L in their window; for a GCRA, those that
  an exact GCRA of the same limit (computed by the harness), fed every admission of the fleet in
  time order, refuses: an answer from Redis is checked at the end of its call and charged from its
  start, the most lenient reading of when Redis decided it.
- **Latency.** *steady p50*: decisions answered by Redis before the fault. The *open phase* of a
  process runs from the first decision it began with its breaker open until Redis returned; the
  table gives its decisions' latency p50 and p99 (half-open included) and, as *Δ*, each
  minus the steady p50; *open only* is the p99 of those begun while the breaker was open (not
  half-open); *waited* the share of the phase's decisions that took over CallTimeout/2 (calls
  that timed out, and a caller's decision made a probe, which floodgate's breakers no longer do). For a peer, the open phase is the whole fault: how long a call blocks.
- **Exact again.** From Redis's return until Redis's accounting was whole again: Redis had been
  told of (or would have forgotten) every admission made without it, and the fleet was over its
  limit no more. An admission made without Redis (degraded; for a peer, an error its fail-open
  caller admits) is owed to Redis until its process carries it there (the harness samples each
  meter's Stats().Carried every 5 ms and takes the first rise after the admission) or Redis
  would have forgotten it anyway: a fixed window's at the end of its window, a GCRA's one second
  later (what Redis missed until then shows as excess admissions). Over the limit: for the fixed
  window the end of a window above 1.01·L, for a GCRA the last excess admission (a GCRA with a
  burst of L may admit up to 2·L in a window after an idle second, exactly, so its windows are
  not the measure). For distsem: the last grant made without Redis, the last moment a process
  held FailLocal weight Redis did not count (LocalStats().Uncarried, sampled every 5 ms: until
  carried or released), a FailOpen permit's release (Redis never counts it), and the end of the
  last moment the fleet held more than C. A refusal made without Redis owes nothing.
  *Redis alone* is the stricter reading: the end of the last decision not answered by Redis, a
  refusal too (FailClosed's; under FailLocal the share's while it recovers, which holds each
  process to its share), and for distsem the release of a degraded permit even once it was
  carried, with the same over-the-limit moments. "never" if the moment was in the run's last
  second.
- **Quota lost.** Fixed window only: in each window, Redis's own count (L minus the least
  Remaining it answered) less the admissions by Redis that callers saw and the cost carried into
  it after an outage (each meter's Stats().Carried, sampled: admissions made without Redis that
  it then counts), summed: quota charged for calls whose callers were told something else (they
  timed out). *Calibration*: before the run
  and again after it (after a second idle), the fleet offers 3·L evenly in one window and the
  admissions by Redis are counted: equal numbers mean the key's state came through intact (a
  fixed window admits L; a GCRA meter idle for a second its burst plus its rate, about 2·L).
- **Gates.** distsem with C = %[13]d across the fleet (default Lease 10 s, WaiterTTL 1 s). Each
  process calls Acquire(1) %[5]g times a second, open loop, waiting at most %[14]s; a grant is held
  %[15]s (offered concurrency 2·C), or until its lease is reported lost, then released. *Held* is
  counted by the harness, from Acquire's return to the end of the hold, not by the library.
  *Lost or leaked*: after the run, with every holder released, the harness waits until each
  process's Stats answers from Redis and no caller is queued, reads Stats (the weight and the
  number of holders Redis holds: both must be 0), then takes TryAcquire(1) round-robin across
  the processes until one is refused with ErrNoCapacity (the fleet must hold exactly C, every
  grant from Redis), releases them, reads Stats again (0), and adds up every process's
  LocalStats().Held (0: nothing held on a local share).
- **The machine.** A shared 2-core VM on which other test runs may be running: each row gives the
  1-minute load average when its run began and ended, and the program's longest scheduling stall
  during it (a goroutine that sleeps 10 ms in a loop and notes each wake-up more than 20 ms late).
  A stall near CallTimeout makes calls time out that Redis answered in time, which the policies
  then answer (*degraded*); *slow before* counts the decisions before the fault (all of a steady
  run's) that took over CallTimeout/2, so a row disturbed that way can be told.
- **The kit's own suite** (a full run only): before the scenarios, `+"`"+kitCommand+"`"+`
  in the root module, REDIS_ADDR unset so that its tests start redis-servers of their own, and
  FLOODGATE_REQUIRE_SERVERS=1 so that none skips; the time is go test's for the package.

`, p.procs, p.callTO, p.limit, p.limit-1, p.rate, share, max(1, gateLimit/p.procs),
		p.warm+time.Second/2, p.recovery, p.outage, p.down, p.lag, gateLimit, p.maxWait, p.hold)
}

// target is one row of the targets table.
type target struct {
	what, measured string
	met, known     bool
}

func writeTargets(w io.Writer, rep *report) {
	var ts []target
	byName := map[string]*result{}
	for _, r := range rep.results {
		byName[r.sc.name()] = r
	}
	add := func(what string, ok bool, known bool, format string, a ...any) {
		m := fmt.Sprintf(format, a...)
		// A miss in a run the machine stalled says so: the stall, not
		// Redis, may have made calls time out.
		for name, r := range byName {
			if !ok && strings.Contains(m, "("+name) && r.stall >= 100*time.Millisecond {
				m += fmt.Sprintf("; that run's longest stall of this program %s, load %s–%s", fmtDur(r.stall), r.loadStart, r.loadEnd)
			}
		}
		ts = append(ts, target{what: what, measured: m, met: ok, known: known})
	}
	find := func(s subject, f fault, pol breaker.Policy) *result {
		for _, r := range rep.results {
			if r.sc.subj == s && r.sc.fault == f && (s.peer() || f == steady || r.sc.policy == pol) {
				return r
			}
		}
		return nil
	}
	// Steady state.
	for _, s := range []subject{fgWindow, fgGCRA} {
		if r := find(s, steady, breaker.FailLocal); r != nil {
			add(fmt.Sprintf("%s, steady: ≤ 1.01·L per window", s), r.rate.max <= 1.01, true, "max %.2f·L", r.rate.max)
		}
		worst, at := 0.0, ""
		for _, r := range rep.results {
			if r.sc.subj == s && r.rate.maxBefore > worst {
				worst, at = r.rate.maxBefore, r.sc.name()
			}
		}
		if at != "" {
			add(fmt.Sprintf("%s, every run before its fault: ≤ 1.01·L per window", s), worst <= 1.01, true, "max %.2f·L (%s)", worst, at)
		}
	}
	if r := find(fgDistsem, steady, breaker.FailLocal); r != nil {
		add("distsem, steady: ≤ C held at once", r.gate.max <= 1, true, "max %.2f·C", r.gate.max)
	}
	// FailLocal through an outage.
	for _, s := range []subject{fgWindow, fgGCRA} {
		for _, f := range []fault{frozen, partition, slow} {
			if r := find(s, f, breaker.FailLocal); r != nil {
				m := fmt.Sprintf("max %.2f·L (windows wholly inside the fault: %.2f·L)", r.rate.max, r.rate.maxInside)
				if s == fgGCRA {
					m += fmt.Sprintf("; floor (an exact GCRA deciding the same calls when they were decided): max %.2f·L; excess %d", r.rate.floorMax, r.rate.excess)
				}
				what := fmt.Sprintf("%s, %s %s, FailLocal (LocalShare L/N): ≤ 1.10·L per window", s, f, rep.p.outage)
				if f == partition {
					// Not the outage: the rest of the fleet has Redis.
					what += " (L from Redis for the rest of the fleet plus the cut-off process's share)"
					if s == fgGCRA {
						m += fmt.Sprintf("; exact split (the calls decided on the share by an exact GCRA of the share, the rest by one of L): max %.2f·L", r.rate.exactSplitMax)
					}
				}
				add(what, r.rate.max <= 1.10, true, "%s", m)
			}
		}
	}
	if r := find(fgDistsem, frozen, breaker.FailLocal); r != nil {
		add(fmt.Sprintf("distsem, Redis frozen %s, FailLocal (LocalShare C/N): ≤ 1.10·C held", rep.p.outage), r.gate.max <= 1.10, true,
			"max %.2f·C (during the fault: %.2f·C)", r.gate.max, r.gate.maxInside)
	}
	// Latency once open.
	for _, s := range []subject{fgWindow, fgGCRA} {
		var worst, worstOnly time.Duration
		at, atOnly := "", ""
		for _, r := range rep.results {
			if r.sc.subj != s || r.rate.openN == 0 {
				continue
			}
			if d := r.rate.openP99 - r.rate.steadyP50; at == "" || d > worst {
				worst, at = d, r.sc.name()
			}
			if d := r.rate.onlyOpenP99 - r.rate.steadyP50; atOnly == "" || d > worstOnly {
				worstOnly, atOnly = d, r.sc.name()
			}
		}
		if at != "" {
			add(fmt.Sprintf("%s: ≤ 1 ms added per decision once the breaker has opened (p99, half-open included)", s),
				worst <= time.Millisecond, true, "%s (%s)", fmtDelta(worst), at)
			add(fmt.Sprintf("%s: the same, decisions begun while the breaker was open (p99)", s),
				worstOnly <= time.Millisecond, true, "%s (%s)", fmtDelta(worstOnly), atOnly)
		}
	}
	// Exact again, and the stricter reading: every decision Redis's again.
	worst := func(s subject, of func(*result) (time.Duration, bool)) (m, at string, ok bool) {
		var worst time.Duration
		never := false
		for _, r := range rep.results {
			if r.sc.subj != s || r.sc.fault == steady {
				continue
			}
			rec, ok := of(r)
			if !ok && !never {
				never, worst, at = true, rec, r.sc.name()
			}
			if !never && (at == "" || rec > worst) {
				worst, at = rec, r.sc.name()
			}
		}
		if never {
			return "never within the run", at, false
		}
		return fmtDur(worst), at, worst <= 2*time.Second
	}
	for _, s := range []subject{fgWindow, fgGCRA, fgDistsem} {
		if m, at, ok := worst(s, (*result).exactAgain); at != "" {
			add(fmt.Sprintf("%s: exact accounting back within 2 s of Redis returning (worst run)", s), ok, true, "%s (%s)", m, at)
		}
	}
	for _, s := range []subject{fgWindow, fgGCRA, fgDistsem} {
		if m, at, ok := worst(s, (*result).recovery); at != "" {
			add(fmt.Sprintf("%s, the stricter reading: every decision made by Redis again within 2 s (refusals without Redis counted: see *Redis alone*)", s), ok, true, "%s (%s)", m, at)
		}
	}
	// Lost or leaked.
	for _, s := range []subject{fgWindow, fgGCRA} {
		var lost, calDiff int64
		var at []string
		seen := false
		for _, r := range rep.results {
			if r.sc.subj != s {
				continue
			}
			seen = true
			d := r.rate.calPost - r.rate.calPre
			if r.rate.lost != 0 || d != 0 || r.rate.calOther != 0 {
				at = append(at, fmt.Sprintf("%s: lost %d, calibration %d → %d", r.sc.name(), r.rate.lost, r.rate.calPre, r.rate.calPost))
			}
			lost += r.rate.lost
			calDiff += abs(d)
		}
		what := fmt.Sprintf("%s: zero quota lost or leaked across every fault", s)
		switch {
		case !seen:
		case len(at) == 0:
			add(what, true, true, "0 lost; calibration equal before and after in every run")
		default:
			add(what, false, true, "%d lost, calibration off by %d in all: %s", lost, calDiff, strings.Join(at, "; "))
		}
	}
	var bad []string
	seen := false
	for _, r := range rep.results {
		if r.sc.subj != fgDistsem {
			continue
		}
		seen = true
		c := r.gate.check
		if c.err != nil || c.inUse != 0 || c.holders != 0 || c.canHold != gateLimit || c.degradedInCheck != 0 || c.inUseAfter != 0 || c.localHeld != 0 {
			bad = append(bad, fmt.Sprintf("%s: %s", r.sc.name(), c.summary()))
		}
	}
	if seen {
		if len(bad) == 0 {
			add("distsem: zero permits lost or leaked across every fault", true, true, "Redis held 0 after release and the fleet held exactly C = %d in every run", gateLimit)
		} else {
			add("distsem: zero permits lost or leaked across every fault", false, true, "%s", strings.Join(bad, "; "))
		}
	}
	if k := rep.kit; k != nil {
		what := "floodgatetest: the whole kit's own suite runs in under 60 s here"
		if k.err != nil {
			add(what, false, true, "the suite failed after %s: %v", fmtDur(k.wall), k.err)
		} else {
			add(what, k.took < time.Minute, true, "%s (`%s`, on redis-servers of its own; %s with the build)", fmtDur(k.took), kitCommand, fmtDur(k.wall))
		}
	}

	fmt.Fprintf(w, "## Targets\n\nEach target of the issue, from the tables below (a miss is reported with its number).\n\n| target | measured | |\n|---|---|---|\n")
	for _, t := range ts {
		verdict := "met"
		if !t.met {
			verdict = "**missed**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.what, t.measured, verdict)
	}
	fmt.Fprintln(w)
}

// writeCauses says where the misses of floodgate's targets come from: what
// the library does, which the tables below measure. It is written only for
// a full run, where every row it speaks of is measured.
func writeCauses(w io.Writer, rep *report) {
	if rep.quick || len(rep.results) < len(scenarios()) {
		return
	}
	var lost int64
	var lostRuns []string
	for _, r := range rep.results {
		if r.rate == nil || r.sc.subj.peer() {
			continue
		}
		if r.rate.lost > 0 {
			lost += r.rate.lost
			lostRuns = append(lostRuns, fmt.Sprintf("%s (%d; longest stall %s)", r.sc.name(), r.rate.lost, fmtDur(r.stall)))
		}
	}
	fmt.Fprint(w, `## Where the misses come from

- **FailLocal at the edges of an outage** (shaper/shaperredis, recovery.go). The local shares and
  Redis count apart, so each edge of an outage could admit the limit twice in one window. Four
  rules keep them: while Redis answers, a key's share is kept at its part of what Redis says
  remains (an outage starts from what the fleet has left, not from full shares); a share decides
  a call when its caller is answered (a call that waits its CallTimeout on a failing Redis holds
  nothing on the share meanwhile, so the calls the opened breaker answers at once are not refused
  for room that the waiting calls then hand out together in the next window); after an outage,
  for one period of the share (its window, or its burst at its rate) after its last decision, a
  decision needs the share's room as well as Redis's (each process keeps to its share while Redis
  has not heard of the outage); and the first decision Redis admits for a key the share decided
  carries the share's debt into Redis: a fixed window's admissions of the current window, and for
  a GCRA, Redis brought down to the share's part of what the fleet has left (Redis, idle through
  the outage, has its whole burst back, which an exact GCRA fed every admission would not). The
  *floor* in the targets is an exact GCRA deciding the same calls at the moments the fleet decided
  them: its largest window, against which a GCRA row above L is over-admission, not the burst.
- **distsem under FailLocal after Redis returns** (distsem/call.go, lease.go). Permits granted on
  a share without Redis stay held after it returns; each is carried into Redis (counted there
  whatever Redis holds) within 250 ms of its process reaching Redis again. Until a process's
  permits are all carried, and for its breaker's longest open period after its last decision
  without Redis (the other processes find Redis again when their own open periods end), a grant
  from Redis needs room on its share first. What is left over C is the moments when a process
  granted on its share while Redis had already given the rest away (a process cut off alone: its
  share). *Exact again* ends once every share's permits are carried (or released); *Redis alone*
  also waits for the hold and for the release of every permit granted without Redis.
- **Latency once the breaker has opened.** While the breaker is open a decision costs
  microseconds, and since the breaker probes Redis itself (a PING) when its open period ends, no
  decision is a probe any more: the half-open phase costs callers nothing either. What remains in
  the p99 of the open phase is calls caught by a scheduling stall of this program (the *stall*
  column) on a busy machine.
- **Exact again.** A process learns that Redis is back when its breaker's open period ends and
  its probe succeeds (up to OpenDuration plus jitter, 1.1 s here, after Redis returned); until
  then it decides without Redis. Under FailClosed those decisions are refusals, which leave
  Redis's accounting whole. Under FailOpen Redis never hears of the outage's admissions, and a
  GCRA has its whole burst again when Redis returns, spent over the next second or two. Under
  FailLocal each process carries its debt on its first decision by Redis, so accounting is whole
  once the last process has found Redis and carried; the recovery then still holds each process
  to its share for one period of it, whose refusals (conservative, never over the limit) the
  stricter *Redis alone* reading counts.
`)
	share := rep.p.limit / int64(rep.p.procs)
	fmt.Fprintf(w, `- **One process cut off** is not an outage of Redis: the rest of the fleet has Redis and its
  limit L, and the cut-off process decides on its share, L/N more, for as long as it is cut off
  (an *excess* of about %[1]d: its %[2]d a second for %[3]s). Its share is a GCRA of its own, not
  aligned to the report's windows, so it can put %[4]d in one window. The GCRA row's *exact
  split* decides the same calls as the design splits them, with exact GCRAs whose share starts
  with its whole burst; floodgate's share starts from what Redis last said remained, so it
  admits less.
`, share*int64(rep.p.outage/time.Second), share, rep.p.outage, share+1)
	fmt.Fprint(w, `- **Failover** is no policy's case: the promoted replica never saw the last writes, so the
  window's count (or the GCRA's state) starts again and about L more is admitted around the
  promotion, by floodgate and the peers alike (the *excess* column); distsem's holders are granted
  again up to its documented 2·C until the old ones release.
`)
	if lost == 0 {
		fmt.Fprint(w, `- **Quota lost** (fixed window) is 0 in every run: floodgate's scripts refuse to spend once
  their call's deadline has passed, so a frozen Redis working through its sockets' backlog, or a
  request that arrives late, spends nothing. What could still lose quota is a call Redis ran in
  time whose reply reached its caller after CallTimeout (a caller process stalled meanwhile).

`)
	} else {
		fmt.Fprintf(w, `- **Quota lost** (fixed window): %d in %s. floodgate's scripts refuse to spend once their
  call's deadline has passed; what is lost is calls Redis ran in time whose replies reached their
  callers after CallTimeout (a caller process stalled meanwhile: see each run's stall).

`, lost, strings.Join(lostRuns, ", "))
	}
}

// exactAgain returns the run's "exact again" time and whether it came
// within the run.
func (r *result) exactAgain() (time.Duration, bool) {
	if r.rate != nil {
		return r.rate.exact, r.rate.exactOK
	}
	return r.gate.exact, r.gate.exactOK
}

// recovery returns the run's "Redis alone" time (the stricter reading)
// and whether it came within the run.
func (r *result) recovery() (time.Duration, bool) {
	if r.rate != nil {
		return r.rate.recovery, r.rate.recovered
	}
	return r.gate.recovery, r.gate.recovered
}

func (c gateCheck) summary() string {
	if c.err != nil {
		return "check failed: " + c.err.Error()
	}
	return fmt.Sprintf("after release Redis held %d in %d holders (%d queued); the fleet could hold %d of %d (%d more without Redis); after the check's release %d; local shares held %d",
		c.inUse, c.holders, c.waiting, c.canHold, gateLimit, c.degradedInCheck, c.inUseAfter, c.localHeld)
}

func writeRates(w io.Writer, rep *report) {
	fmt.Fprintf(w, "## Rate limits: L = %d per window, %d processes offering 2·L\n\n", rep.p.limit, rep.p.procs)
	for f := steady; f <= slow; f++ {
		rows := rep.rows(func(r *result) bool { return r.sc.fault == f && r.rate != nil })
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "### %s\n\n", f)
		fmt.Fprintln(w, "| subject | policy | max /L | p99 /L | inside /L | before /L | excess | steady p50 | open phase p50 / p99 (Δ p99) | open only p99 | waited | exact again | Redis alone | quota lost | calibration | errors / degraded / decisions | slow before | load; stall |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rows {
			s := r.rate
			pol := r.sc.policy.String()
			if r.sc.subj.peer() {
				pol = "caller fails open"
			}
			writeRateRow(w, r, pol, s.max, s.p99, s.maxInside, s.maxBefore, s.excess, s.exact)
			if r.sc.subj.peer() {
				writeRateRow(w, r, "caller fails closed", s.closedMax, s.closedP99, s.closedInside, s.maxBefore, s.closedExcess, s.closedExact)
			}
		}
		fmt.Fprintln(w)
	}
}

func writeRateRow(w io.Writer, r *result, pol string, mx, p99, inside, before float64, excess int64, exactD time.Duration) {
	s := r.rate
	open, only, waited := "–", "–", "–"
	if s.openN > 0 {
		open = fmt.Sprintf("%s / %s (%s)", fmtDur(s.openP50), fmtDur(s.openP99), fmtDelta(s.openP99-s.steadyP50))
		if !r.sc.subj.peer() {
			only = fmtDur(s.onlyOpenP99)
		}
		waited = fmt.Sprintf("%.1f%%", 100*s.waitedShare)
	}
	insideS, exact, alone := "–", "–", "–"
	if r.tl.faulty() {
		insideS = fmt.Sprintf("%.2f", inside)
		exact, alone = fmtDur(exactD), fmtDur(s.recovery)
		if !s.exactOK {
			exact = "never"
		}
		if !s.recovered {
			alone = "never"
		}
	}
	lost := "–"
	if r.sc.subj == fgWindow {
		lost = fmt.Sprint(s.lost)
	}
	cal := fmt.Sprintf("%d → %d", s.calPre, s.calPost)
	if s.calOther > 0 {
		cal += fmt.Sprintf(" (%d not by Redis)", s.calOther)
	}
	fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %.2f | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d / %d | %d | %s–%s; %s |\n",
		r.sc.subj, pol, mx, p99, insideS, before, excess, fmtDur(s.steadyP50), open, only, waited, exact, alone, lost, cal,
		s.errors, s.degradedN, s.decisions, s.slowBefore, r.loadStart, r.loadEnd, fmtDur(r.stall))
}

// rows returns the results keep keeps, in order.
func (rep *report) rows(keep func(*result) bool) []*result {
	var out []*result
	for _, r := range rep.results {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// writeSeries shows the windows of every rate run, one line each.
func writeSeries(w io.Writer, rep *report) {
	rows := rep.rows(func(r *result) bool { return r.rate != nil })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### Every window\n\n"+
		"The fleet's admissions per window as multiples of L, from the second window on (a peer's: its fail-open caller's); "+
		"[ marks the window the fault began in, ] the one Redis returned in.\n\n<details><summary>%d runs</summary>\n\n```\n", len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, x := range r.rate.series {
			switch i {
			case r.rate.faultWin:
				b.WriteString(" [")
			case r.rate.returnWin:
				b.WriteString(" ]")
			default:
				b.WriteString("  ")
			}
			fmt.Fprintf(&b, "%.2f", x)
		}
		fmt.Fprintf(w, "%-58s%s\n", r.sc.name(), b.String())
	}
	fmt.Fprint(w, "```\n\n</details>\n\n")
}

func writeGates(w io.Writer, rep *report) {
	rows := rep.rows(func(r *result) bool { return r.gate != nil })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Gates: distsem, C = %d, %d processes offering 2·C\n\n", gateLimit, rep.p.procs)
	fmt.Fprintln(w, "| fault | policy | max held /C | p99 /C | during the fault /C | before /C | grants/s before / during | Acquire p50 before | open phase p50 / p99 | exact again | Redis alone | leases lost | errors / acquires | lost or leaked (check after release) | load; stall |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := r.gate
		inside, during, exact, alone := "–", "–", "–", "–"
		if r.tl.faulty() {
			inside = fmt.Sprintf("%.2f", s.maxInside)
			during = fmt.Sprintf("%.0f", s.grantsFault)
			exact, alone = fmtDur(s.exact), fmtDur(s.recovery)
			if !s.exactOK {
				exact = "never"
			}
			if !s.recovered {
				alone = "never"
			}
		}
		open := "–"
		if s.openN > 0 {
			open = fmt.Sprintf("%s / %s", fmtDur(s.openP50), fmtDur(s.openP99))
		}
		check := "none"
		c := s.check
		if c.err != nil || c.inUse != 0 || c.holders != 0 || c.canHold != gateLimit || c.degradedInCheck != 0 || c.inUseAfter != 0 || c.localHeld != 0 {
			check = c.summary()
		} else {
			check = fmt.Sprintf("none: Redis 0 held, the fleet held %d/%d, local 0", c.canHold, gateLimit)
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %.2f | %.0f / %s | %s | %s | %s | %s | %d | %d / %d | %s | %s–%s; %s |\n",
			faultKeys[r.sc.fault], r.sc.policy, s.max, s.p99, inside, s.maxBefore, s.grantsSteady, during, fmtDur(s.steadyP50),
			open, exact, alone, s.lostLeases, s.errors, s.acquires, check, r.loadStart, r.loadEnd, fmtDur(r.stall))
	}
	fmt.Fprintln(w)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// fmtDelta formats a latency difference with its sign.
func fmtDelta(d time.Duration) string {
	if d >= 0 {
		return "+" + fmtDur(d)
	}
	return fmtDur(d)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
