// Package floodgatetest is a kit for testing your floodgate configuration in
// your own tests: "with our layers, 12 pods and Redis failing over, do we ever
// let more than 50 report queries through?" It has a fault proxy to put
// between a client and its Redis, a private redis-server for a test, invariant
// checks that run on any gate, rate or bulkhead of yours, and two helpers for
// testing/synctest. floodgate's own tests use it, so it runs on every `make
// test` of the project.
//
// It is one package, in floodgate's root module: it needs only the standard
// library, go-redis (which that module already has) and floodgate's core
// packages, and none of those import it.
//
// # Faults: Proxy
//
// A [Proxy] listens on a free loopback port in front of an address and
// forwards to it; the client dials [Proxy.Addr] instead of the server.
// [Proxy.Freeze] stops the bytes in both directions (a stalled server: calls
// hang, nothing is lost, and the streams continue exactly after
// [Proxy.Heal]), [Proxy.Delay] slows every chunk, [Proxy.Drop] closes every
// connection and refuses new ones, [Proxy.Reset] resets the open connections
// once, [Proxy.SetTarget] sends new connections elsewhere (with Reset, a
// failover to a replica), and [Proxy.Heal] takes every fault away. No root,
// no signal, no iptables: the server keeps running for everyone else.
//
// To partition one client (one pod) from the server, give that client a
// Proxy of its own and freeze or drop it; the other clients dial the server,
// or proxies of their own, and are unaffected.
//
//	srv := floodgatetest.StartRedis(t)               // or floodgatetest.RedisAddr(t)
//	p := floodgatetest.StartProxy(t, srv.Addr)       // closed when the test ends
//	rdb := redis.NewClient(floodgatetest.RedisOptions(p.Addr()))
//	p.Freeze()                                       // Redis stalls for this client
//	// ... your calls must answer within your CallTimeout ...
//	p.Heal()
//
// # Redis
//
// [RedisAddr] returns REDIS_ADDR when set (a server other tests may share:
// give your limiters a [KeyPrefix] and clean up with [DeletePrefix], never a
// flush) and otherwise starts a private server. [StartRedis] always starts a
// private redis-server child (REDIS_SERVER, or redis-server on PATH) on a free
// loopback port with no persistence, stopped when the test ends;
// [RedisServer.Kill] stops it at once and [RedisServer.Restart] brings back an
// empty one on the same address.
//
// When a server a test needs is missing (no REDIS_ADDR and no redis-server
// binary), the test is skipped, with a message saying what is missing; with
// CI=true or FLOODGATE_REQUIRE_SERVERS=1 in the environment it fails instead,
// so that CI never silently tests nothing ([Missing], [ServersRequired]).
//
// # Invariants
//
// The subject of each check is a [Runner]: your configuration admitting or
// refusing one call, as bulkhead.Bulkhead.Do does; [GateRunner],
// [TryGateRunner] and [RateRunner] make one of any floodgate.Gate or rate.
// Each check has a pure form that returns a report and an error (a
// *[Violation] saying what broke, with the numbers), and a Check form that
// logs the report and fails the test:
//
//   - [NoOverAdmission] ([CheckNoOverAdmission]): a [Fleet] of pods, each
//     built by your factory as each pod builds its own (its own Redis client,
//     its own limiter), hammers the configuration; never more than
//     [Bound].Concurrent calls run at once, never more than Bound.Admitted
//     are admitted in any Window ([RateBound] computes a meter's).
//   - [HonestRetryAfter] ([CheckRetryAfter]): after a refusal with RetryAfter
//     d, a retry d later is admitted (and, with Tight, d is not longer than
//     needed).
//   - [PermitsBalance] ([CheckPermitsBalance]): random holds, cancellations
//     at random moments and releases leave the gate whole: nothing in use at
//     the end, and a hold of the whole limit succeeds.
//   - [AnswersWithin] ([CheckAnswersWithin]): under each fault (freeze, a
//     delay of twice the CallTimeout, drop, repeated resets) every call
//     answers within CallTimeout + ε; the report gives the worst.
//
// Each is shown failing on a deliberately broken subject in the package's
// own tests and examples (a semaphore per pod, a halved RetryAfter, a gate
// that loses releases, a client without a call timeout): they can fail.
//
//	fleet := floodgatetest.Fleet{Pods: 12, New: func(pod int) floodgatetest.Runner {
//		rdb := redis.NewClient(floodgatetest.RedisOptions(addr)) // each pod its own client
//		sem := distsem.New(rdb, prefix+"reports", 50, distsem.Config{})
//		return floodgatetest.GateRunner(sem, 1)
//	}}
//	floodgatetest.CheckNoOverAdmission(t, fleet, floodgatetest.Load{Duration: 2 * time.Second},
//		floodgatetest.Bound{Concurrent: 50})
//
// # Fake time
//
// floodgate's local types (semaphore, shaper's meters, Limiter and Queue,
// breaker, bulkhead over local layers, adaptive.Gate, backoff) read time.Now
// and use the time package's timers: inside a testing/synctest bubble they run
// on its fake clock, with no clock to inject (the fake clock x/time and
// uber-go/ratelimit users ask for). [Advance] moves the bubble's clock and
// lets every goroutine settle; [Steps] calls a function at fixed fake
// intervals. NoOverAdmission, HonestRetryAfter and PermitsBalance run inside
// a bubble too, so an hour of load on a local configuration takes
// milliseconds and the RetryAfter check is exact:
//
//	synctest.Test(t, func(t *testing.T) {
//		q := shaper.NewQueue(shaper.Every(200*time.Millisecond), shaper.QueueConfig{})
//		// ... goroutines calling q.Wait ...
//		floodgatetest.Steps(5, 100*time.Millisecond, func(i int, elapsed time.Duration) {
//			// check how many have started by elapsed
//		})
//	})
//
// The Redis-backed types (distsem, shaperredis, adaptiveredis) decide by
// Redis's clock over real sockets, so test them in real time, with generous
// bounds and a Proxy for the faults; AnswersWithin uses real time.
package floodgatetest
