// Package bulkhead admits requests through ordered layers of rate limits and
// concurrency gates, for any code path ([Bulkhead.Do]) and as net/http
// middleware ([Bulkhead.Handler]): "tenant acme may start 5 PDF exports a
// minute and run 2 at once; over that, 429 with an honest Retry-After".
//
// # Layers
//
// A [Layer] is a key, an optional [Rate] and an optional [Gate] or [KeyedGate]:
// a global concurrency cap (a Gate, no key), a tenant-tier quota (a Rate picked
// from [Layer.Tiers] by the identity's tier, keyed by tenant), per-route rates
// ([Layer.Route] "GET /items" vs "POST /reports/export-pdf") and per-route,
// per-tenant concurrency (a KeyedGate). A request passes the layers that apply
// to it in order; each layer checks its rate first, then takes its gate. The
// interfaces are small and declared here; the leaves satisfy them as they are:
// every shaper meter and shaper.Limiter is a Rate (Admit), semaphore.Weighted
// and distsem.Semaphore are Gates, semaphore.Keyed (and a fleet-wide keyed
// gate) is a KeyedGate. This package imports no Redis client: an application
// wires Redis-backed leaves in, and what a layer does when Redis is down is
// the policy of the leaf underneath (FailOpen, FailClosed, FailLocal).
//
//	tenants := semaphore.NewKeyed(2, semaphore.KeyedConfig{})
//	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
//		{Name: "global", Gate: semaphore.New(200, semaphore.Config{}), MaxWait: time.Second},
//		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{
//			"free": shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)}),
//			"gold": shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1000)}),
//		}},
//		{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant,
//			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)}), KeyedGate: tenants, MaxWait: -1},
//	}})
//	http.Handle("/", auth(b.Handler(mux)))
//
// # Rejections and quota already taken
//
// A refusal is a [*RejectError] naming its layer, with a [Reason], an HTTP
// status, RetryAfter, and the leaf's error underneath (errors.Is(err,
// shaper.ErrLimited) works through it). When a later layer refuses a request,
// the gates of earlier layers are given back at once, but rate quota they took
// stays spent: giving it back would cost another store round trip per refusal
// on Redis-backed meters, and would let a client flood a refusing layer while
// its earlier quotas stay untouched. Order layers so that cheap, coarse refusals
// come first.
//
// # Identity
//
// The key of every per-client layer comes from the [Identity] that the
// application's authentication layer verified and put in the context with
// [WithIdentity]: an API key's tenant, a JWT's subject or tenant claim. It never
// comes from a header or a tenant id the client sent: a client that can choose
// its key can spread its requests over fresh keys (escaping its quota) or
// spend someone else's. A request with no identity is never pooled with
// others: it is refused with [ErrNoIdentity] (401), or, with
// [Config.Anonymous], limited under an identity of its own keyed by the
// client's address ([ClientAddr]), whose Tier ([Config.AnonymousTier]) picks a
// small quota from [Layer.Tiers]. X-Forwarded-For is ignored unless
// [Config.TrustedProxies] names the proxies that set it, since any client can
// write it.
//
// Bad input is refused before any layer is charged: no identity (401), a key
// that is empty or longer than [Config.MaxKeyLen] ([ErrInvalidKey], 401), a
// tier with no rate ([ErrNoPolicy], 403). A negative [Layer.N] panics in
// [New]; zero means 1. A request that no layer applies to (a route with no
// policy, and no global layer) passes and is counted in [Stats].Unmatched.
//
// # HTTP
//
// [Bulkhead.Handler] answers a refusal with the layer's status (429 for a
// client's own quota, 503 for global saturation or a store outage, both
// configurable), Retry-After in whole seconds rounded up (never 0 for a
// delay, so a client that waits that long is not refused again by the same
// rate unless others used the room), and the JSON body
// {"error","message","retry_after_seconds"} or the output of [Config.Render].
// The error's text never reaches the client. [Config.RateLimitFields] adds the
// RateLimit and RateLimit-Policy fields in the structured-field syntax of
// draft-ietf-httpapi-ratelimit-headers-11 (an Internet-Draft, not an RFC; the
// syntax may change). The gates are held until the handler returns, panics
// included, and a request waits for a gate at most [Layer.MaxWait] on its own
// context.
//
// # Job workers
//
// [Workers] throttles job loops rather than requests: "export jobs start at
// most 5/s fleet-wide, smoothly; at most 8 run at once; interactive exports
// are never starved by background ones; shutdown drains". [NewWorkers] takes
// how many jobs may run at once in this process and a [WorkersConfig]:
// priority classes ([Class]) with reserved capacity (what a reservation
// protects, and from whom, is said once, in [Class.Reserved]) and a bounded
// backlog, a [Pacer] that spaces out starts (a shaper.Queue, or the
// fleet-wide Redis queue) and a [Gate] shared beyond the process (a
// distsem.Semaphore for the fleet). [Workers.Submit] queues a job and returns at once, refusing with
// [ErrQueueFull] and a RetryAfter when the class's backlog is full, so the
// loop can leave the message on its broker; [Workers.Do] queues a job and
// waits for its result. [Workers.Shutdown] stops intake and runs (or hands
// back) the backlog: no submitted job is dropped silently. [Workers.Stats]
// counts jobs per class, by outcome.
//
// # Database queries
//
// Package bulkheadpgx, in bulkhead/bulkheadpgx, caps classes of queries on a
// pgxpool.Pool: "at most 50 report queries against the replica across all
// pods; cheap queries unlimited; a report query that cannot start within 2 s
// fails fast". Each class is gated by a semaphore.Weighted for one process or
// a distsem.Semaphore for the fleet, held exactly as long as the database
// work. It is a package of its own so that bulkhead does not import pgx.
//
// # Stats
//
// [Bulkhead.Stats] counts per layer: admitted, rejected by reason, degraded
// decisions (made by a fallback while the store was unavailable; optionally
// listed in [Config.DegradedHeader]), in flight, waiting and wait time.
//
// A Bulkhead is safe for simultaneous use by multiple goroutines. With local
// leaves, an admitted request allocates nothing of bulkhead's own.
package bulkhead
