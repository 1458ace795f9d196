package main

// The summary rows: which case of floodgate is compared with which case of a
// peer. Names are benchmark cases as `go test -bench` prints them (without the
// -GOMAXPROCS suffix). A row whose floodgate case did not run is left out; a
// benchmark no row names still appears in the summary by the generic rule
// (impl=floodgate… against every other impl of the same case) and in the full
// tables. A row's target column is the targets of its floodgate case (see
// targets.go).

type row struct {
	what    string
	fg      string
	peers   []string // none: a row with no peer (a count, not a comparison)
	noRatio bool     // the metric is not one where a ratio means anything
}

type section struct {
	title string
	rows  []row
}

func impls(bench string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = bench + "/impl=" + n
	}
	return out
}

// blockedPeers are the peers of a 64-on-4 row: the libraries, then the two
// hand-off floors, at GOMAXPROCS procs ("1" or "all").
func blockedPeers(procs string) []string {
	out := impls("BenchmarkSemaphoreBlocked", "xsync", "failsafe", "chan", "floor-send", "floor-close")
	for i := range out {
		out[i] += "/procs=" + procs
	}
	return out
}

// keyedPeers are the peers of a keyed meter row: the in-process stores a user
// would pick, then the harness's floor.
func keyedPeers(order string) []string {
	var out []string
	for _, impl := range []string{"sethvargo", "throttled", "floor"} {
		out = append(out, "BenchmarkKeyedMeter/impl="+impl+"/order="+order)
	}
	return out
}

func conc(bench, impl string, c string) string { return bench + "/impl=" + impl + "/conc=" + c }

var sections = []section{
	{"Local semaphore (package semaphore) vs golang.org/x/sync/semaphore", []row{
		{what: "Acquire+Release, uncontended", fg: "BenchmarkSemaphoreAcquireRelease/impl=floodgate",
			peers: impls("BenchmarkSemaphoreAcquireRelease", "xsync", "failsafe", "chan", "floor")},
		{what: "TryAcquire on a full semaphore", fg: "BenchmarkSemaphoreTryAcquireFull/impl=floodgate",
			peers: impls("BenchmarkSemaphoreTryAcquireFull", "xsync", "chan")},
		{what: "64 goroutines on 4 permits (every Acquire waits), GOMAXPROCS 1", fg: "BenchmarkSemaphoreBlocked/impl=floodgate/procs=1",
			peers: blockedPeers("1")},
		{what: "64 goroutines on 4 permits, every core (scheduler-bound)", fg: "BenchmarkSemaphoreBlocked/impl=floodgate/procs=all",
			peers: blockedPeers("all")},
	}},
	{"Local rate limits (package shaper) vs x/time/rate, failsafe-go, uber ratelimit, sethvargo/go-limiter, throttled", []row{
		{what: "`Limiter.Allow`, one goroutine", fg: "BenchmarkRateAllow/impl=floodgate-limiter",
			peers: impls("BenchmarkRateAllow", "xtime", "failsafe-smooth", "uber")},
		{what: "`Limiter.Allow`, all cores on one limiter", fg: "BenchmarkRateAllowContended/impl=floodgate-limiter",
			peers: impls("BenchmarkRateAllowContended", "xtime", "failsafe-smooth")},
		{what: "keyed `Meter.Allow`, one key (peers are unkeyed)", fg: "BenchmarkRateAllow/impl=floodgate-gcra",
			peers: impls("BenchmarkRateAllow", "xtime", "failsafe-smooth", "uber")},
		{what: "keyed meter over 1M keys, a hot 4k subset", fg: "BenchmarkKeyedMeter/impl=floodgate/order=hot4k",
			peers: keyedPeers("hot4k")},
		{what: "keyed meter over 1M keys, in creation order", fg: "BenchmarkKeyedMeter/impl=floodgate/order=sequential",
			peers: keyedPeers("sequential")},
		{what: "keyed meter over 1M keys, in random order (every call a cache miss)", fg: "BenchmarkKeyedMeter/impl=floodgate/order=random",
			peers: keyedPeers("random")},
		{what: "`Queue` pacing a loop, 1k/s", fg: "BenchmarkShaperAccuracy/impl=floodgate-queue/rate=1000/burst=10",
			peers: []string{"BenchmarkShaperAccuracy/impl=uber/rate=1000"}, noRatio: true},
		{what: "`Queue` pacing a loop, 10k/s", fg: "BenchmarkShaperAccuracy/impl=floodgate-queue/rate=10000/burst=100",
			peers: []string{"BenchmarkShaperAccuracy/impl=uber/rate=10000"}, noRatio: true},
		{what: "`Queue` pacing a loop, 100k/s", fg: "BenchmarkShaperAccuracy/impl=floodgate-queue/rate=100000/burst=1000",
			peers: []string{"BenchmarkShaperAccuracy/impl=uber/rate=100000"}, noRatio: true},
		{what: "`Queue` pacing a loop, 1M/s", fg: "BenchmarkShaperAccuracy/impl=floodgate-queue/rate=1000000/burst=10000",
			peers: []string{"BenchmarkShaperAccuracy/impl=uber/rate=1000000"}, noRatio: true},
		{what: "`Queue` pacing a loop, 1M/s, no burst", fg: "BenchmarkShaperAccuracy/impl=floodgate-queue/rate=1000000/burst=0",
			peers: []string{"BenchmarkShaperAccuracy/impl=floor/rate=1000000/burst=0"}},
	}},
	{"Store breaker (package breaker) vs sony/gobreaker", []row{
		{what: "`Do` success path, call timeout off", fg: "BenchmarkBreakerSuccess/impl=floodgate/timeout=off",
			peers: []string{"BenchmarkBreakerSuccess/impl=gobreaker", "BenchmarkBreakerSuccess/impl=floor"}},
		{what: "`Do` success path, caller's deadline sooner than the call timeout", fg: "BenchmarkBreakerSuccess/impl=floodgate/timeout=callerdeadline",
			peers: []string{"BenchmarkBreakerSuccess/impl=gobreaker"}},
		{what: "`Do` success path, default call timeout, Background context", fg: "BenchmarkBreakerSuccess/impl=floodgate/timeout=on",
			peers: []string{"BenchmarkBreakerSuccess/impl=gobreaker"}},
		{what: "a call while the breaker is open (fail closed: an error, no store call)", fg: "BenchmarkBreakerOpen/impl=floodgate/policy=fail-closed",
			peers: []string{"BenchmarkBreakerOpen/impl=gobreaker"}},
		{what: "`Do` success path, all cores on one breaker", fg: "BenchmarkBreakerParallel/impl=floodgate/timeout=off",
			peers: []string{"BenchmarkBreakerParallel/impl=gobreaker"}},
	}},
	{"Redis GCRA meter (package shaper) vs go-redis/redis_rate", []row{
		{what: "one goroutine", fg: conc("BenchmarkRedisMeter", "floodgate", "1"),
			peers: []string{conc("BenchmarkRedisMeter", "redis_rate", "1"), conc("BenchmarkRedisMeter", "throttled", "1"), conc("BenchmarkRedisMeter", "evalsha", "1")}},
		{what: "32 goroutines", fg: conc("BenchmarkRedisMeter", "floodgate", "32"),
			peers: []string{conc("BenchmarkRedisMeter", "redis_rate", "32"), conc("BenchmarkRedisMeter", "evalsha", "32")}},
		{what: "128 goroutines", fg: conc("BenchmarkRedisMeter", "floodgate", "128"),
			peers: []string{conc("BenchmarkRedisMeter", "redis_rate", "128"), conc("BenchmarkRedisMeter", "evalsha", "128")}},
		{what: "`Batch`, 32 goroutines", fg: conc("BenchmarkRedisMeter", "floodgate-batch", "32"),
			peers: []string{conc("BenchmarkRedisMeter", "floodgate", "32"), conc("BenchmarkRedisMeter", "redis_rate", "32")}},
		{what: "`Batch`, 128 goroutines", fg: conc("BenchmarkRedisMeter", "floodgate-batch", "128"),
			peers: []string{conc("BenchmarkRedisMeter", "floodgate", "128"), conc("BenchmarkRedisMeter", "redis_rate", "128")}},
		{what: "token leasing vs a Redis call per decision, one goroutine", fg: conc("BenchmarkRedisLease", "lease", "1"),
			peers: []string{conc("BenchmarkRedisLease", "per-request", "1")}},
		{what: "token leasing vs a Redis call per decision, 32 goroutines", fg: conc("BenchmarkRedisLease", "lease", "32"),
			peers: []string{conc("BenchmarkRedisLease", "per-request", "32")}},
		{what: "token leasing vs a Redis call per decision, 128 goroutines", fg: conc("BenchmarkRedisLease", "lease", "128"),
			peers: []string{conc("BenchmarkRedisLease", "per-request", "128")}},
	}},
	{"Redis semaphore (package distsem)", []row{
		{what: "round trips per uncontended Acquire / Release", fg: "BenchmarkDistsemRoundTrips"},
		{what: "Acquire+Release pair, one goroutine, vs one bare EVALSHA", fg: "BenchmarkDistsemPair/impl=distsem",
			peers: []string{"BenchmarkDistsemPair/impl=evalsha"}},
		{what: "Acquire+Release pairs, 32 goroutines, vs two bare EVALSHAs", fg: "BenchmarkDistsemParallel/impl=distsem",
			peers: []string{"BenchmarkDistsemParallel/impl=evalsha2"}},
		{what: "32 goroutines in 4 processes on 4 permits, each held 1 ms", fg: "BenchmarkDistsemContended"},
	}},
	{"HTTP admission middleware (package bulkhead) vs failsafe-go's failsafehttp and throttled", []row{
		{what: "one request at a time", fg: "BenchmarkBulkhead/impl=floodgate",
			peers: impls("BenchmarkBulkhead", "failsafehttp", "throttled", "bare")},
		{what: "all cores", fg: "BenchmarkBulkhead/impl=floodgate/parallel",
			peers: []string{"BenchmarkBulkhead/impl=failsafehttp/parallel", "BenchmarkBulkhead/impl=throttled/parallel", "BenchmarkBulkhead/impl=bare/parallel"}},
		{what: "over loopback sockets: net/http server and 32 keep-alive clients on 127.0.0.1", fg: "BenchmarkBulkheadLoopback/impl=floodgate/clients=32",
			peers: []string{"BenchmarkBulkheadLoopback/impl=failsafehttp/clients=32", "BenchmarkBulkheadLoopback/impl=throttled/clients=32", "BenchmarkBulkheadLoopback/impl=bare/clients=32"}},
	}},
	{"gRPC server interceptor (bulkhead/bulkheadgrpc) vs failsafe-go's failsafegrpc", []row{
		{what: "a unary call over loopback TCP, one at a time", fg: "BenchmarkGRPC/impl=floodgate",
			peers: impls("BenchmarkGRPC", "failsafegrpc", "bare")},
		{what: "unary calls over loopback TCP, all cores", fg: "BenchmarkGRPC/impl=floodgate/parallel",
			peers: []string{"BenchmarkGRPC/impl=failsafegrpc/parallel", "BenchmarkGRPC/impl=bare/parallel"}},
		{what: "the interceptor alone, no network", fg: "BenchmarkGRPCInterceptor/impl=floodgate",
			peers: impls("BenchmarkGRPCInterceptor", "failsafegrpc", "bare")},
	}},
}
