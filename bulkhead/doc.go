// Package bulkhead admits requests through ordered layers of rate limits and
// concurrency gates, for any code path ([Bulkhead.Do]) and as net/http
// middleware ([Bulkhead.Handler]): "tenant acme may start 5 PDF exports a
// minute and run 2 at once; over that, 429 with an honest Retry-After".
//
// # Layers
//
// A [Layer] is a key, an optional [Rate] and an optional gate (a
// floodgate.Gate, or a floodgate.KeyedGate held under the layer's key):
// a global concurrency cap (a Gate, no key), a tenant-tier quota (a Rate picked
// from [Layer.Tiers] by the identity's tier, keyed by tenant), per-route rates
// ([Layer.Route], a ServeMux pattern: "GET /items/{id}" vs "POST
// /reports/export-pdf") and per-route,
// per-tenant concurrency (a KeyedGate). A request passes the layers that apply
// to it in order; each layer checks its rate first, then takes its gate. The
// leaves satisfy them as they are: every shaper meter and shaper.Limiter is a
// Rate (Admit), semaphore.Weighted and distsem.Semaphore are Gates,
// semaphore.Keyed and distsem.Keyed are KeyedGates. A layer takes its gate
// as every floodgate consumer does (TryHold, then a Hold bounded by
// [Layer.MaxWait]). This package imports no Redis client: an application
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
// A refusal is a [*RejectError] (floodgate's one refusal type) naming its
// layer, with a Reason (a word: limited, no_capacity, max_wait, ...), an HTTP
// status, RetryAfter, and the leaf's error underneath (errors.Is(err,
// shaper.ErrLimited) works through it). A refused request costs nothing:
// whatever step refuses it (a later layer's rate, a full gate, a gate wait
// that ends or times out, a store unavailable, a leaf's error, the client
// going away), the gates of earlier layers are given back and so is the rate
// quota they charged, last layer first. The rates give it back through their
// Refund method (see [Rate]), which every shaper meter, shaper.Limiter and
// every shaperredis meter has (see shaper.Meter.Refund for how exact each
// algorithm is); a Rate without one stays charged. On Redis a refund is one
// more round trip, on the refusal path only, made even when the request's
// context has ended, and best effort: a refund that fails (Redis down)
// leaves that quota spent, is counted in [LayerStats].RefundErrors, and
// never changes the answer. A request that was admitted and served is never
// refunded, whatever its handler or fn then did (an error from the work is
// service rendered).
//
// Refusals that come from the request itself (no identity, an invalid key,
// including one a layer's leaf would refuse, no policy for its tier) are made
// before any layer is charged. Order layers so that cheap, coarse refusals
// come first: a refund is cheaper than a charge, but costs a round trip too.
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
// Anonymous identities have a key space of their own: whatever a layer's Key
// makes of one, no verified identity has the same key (a tenant named
// "addr:10.0.0.7" and the anonymous client at 10.0.0.7 never share a quota;
// see [Identity.Anonymous]).
//
// Bad input is refused before any layer is charged: no identity (401), a key
// that is empty or longer than [Config.MaxKeyLen] ([ErrInvalidKey], 401), a
// key that a layer's leaf refuses (a leaf with a CheckKey method, such as
// distsem.Keyed and the shaperredis meters, is asked first; [ErrInvalidKey],
// 401), a tier with no rate ([ErrNoPolicy], 403). Any other key is valid,
// braces and any other bytes included: the Redis-backed leaves escape what a
// Redis Cluster hash tag cannot hold. A negative [Layer.N] panics in [New];
// zero means 1. A request that no layer applies to (a route with no
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
// The error's text never reaches the client. The gates are held until the
// handler returns, panics included, and a request waits for a gate at most
// [Layer.MaxWait] on its own context.
//
// # Routes
//
// [Layer.Route] is an http.ServeMux pattern, and a layer applies to exactly
// the requests a ServeMux holding only that pattern would dispatch to it, so
// that a limit cannot be walked around by spelling a path differently: the
// pattern is checked by a real ServeMux in [New] (one it rejects panics there),
// and requests are matched as ServeMux matches them, on the escaped path,
// segment by segment. "GET /items/{id}" applies to GET and HEAD /items/7 and to
// /items/a%2Fb (one segment, "a/b"), not to /items/7/parts; "/{$}" to "/"
// alone; "/static/" to everything below it; "api.example.com/" to that host
// only, any port. A request ServeMux would only redirect (an unclean path such
// as //items/7 or /a/../items/7, or /static for "/static/") reaches no handler,
// so no layer applies to it; the request that follows the redirect is
// limited. Each layer routes alone: all layers whose patterns match apply, a
// broad "/api/" layer included when the application's mux has a more
// specific pattern. With [Config.RouteByPattern], and the Handler inside the
// mux around each handler, a layer applies instead exactly when the mux chose
// its pattern (http.Request.Pattern). Routing allocates nothing, except net/url's
// EscapedPath for a path sent with escapes.
//
// # RateLimit fields
//
// [Config.RateLimitFields] adds the RateLimit and RateLimit-Policy fields in
// the structured-field syntax of draft-ietf-httpapi-ratelimit-headers (an
// Internet-Draft, not an RFC; the syntax may change), one item per rate layer
// the request was checked against, counted in requests of [Layer.N] units.
// They never promise more than the layer enforces, so a client that follows
// them literally is not refused: RateLimit-Policy's q is the most requests
// admitted at once (the burst, or the count if less) and w the seconds the
// rate takes to earn them back, rounded up ("q=2;w=1" for 2/s with a burst of
// 4, "q=10;w=6" for 100/min with a burst of 10), so that q requests in any w
// seconds always pass (over a sliding counter, whose estimate weighs the
// previous window, q requests in any 2w seconds); RateLimit's r is the requests admitted now, at most q,
// and t the seconds until the key is back to its initial state. On the
// layer's own refusal, r is 0 and t equals Retry-After: the time until the
// refused request would be admitted (the next response tells how many more).
// A layer whose store could not be asked has no item.
//
// # Overload: shedding by criticality
//
// When the downstream is saturated, not all requests are equal: a user
// clicking "export" matters more than a nightly sync, and a health check
// more than both. [Layer.Classes] gives a layer's gate criticality classes,
// most critical first ([Criticality]: a name, a reservation, a MaxWait, a
// MaxQueue):
//
//	{Name: "global", Gate: gate, MaxWait: 2 * time.Second, Classes: []bulkhead.Criticality{
//		{Name: "critical", Reserved: 4},           // health checks, interactive exports
//		{Name: "default"},                         // waits up to the layer's 2 s
//		{Name: "batch", MaxWait: 100 * time.Millisecond},
//		{Name: "sheddable", MaxWait: -1},          // never waits: shed when full
//	}}
//
// A request waits only behind requests of its own class and more critical
// ones (strict priority, FIFO within a class), so when the gate is full the
// least critical requests are the ones left waiting, and they are refused
// first: with [ErrShed], 503, and a Retry-After estimated from how fast the
// gate frees up and how many wait ahead. Capacity reserved for a class is
// kept from every other class, more or less critical (the same rules as the
// job classes of [Workers], one implementation for both). The layer's gate
// stays the one exact cap: a fixed semaphore, a fleet-wide distsem, or an
// adaptive.Gate whose limit follows the downstream (reservations are then
// checked against its MaxLimit and counted against its current limit;
// where that falls to them, they never leave the gate idle). A fleet gate
// knows nothing of classes: priorities and reservations are kept in each
// process, and the dispatcher of a layer waits at the gate once at a time,
// so where other consumers share the gate (another layer, Workers, other
// processes of a distsem fleet) each of them has as many places in its
// queue as it has waiters, and the classed layer one.
//
// A request's class is decided by the application, from what it has
// verified: [Config.Criticality] (from the identity or the route) or, by
// default, [Identity.Criticality]; a class the layer does not have is its
// least critical. A client header is believed only when
// [Config.CriticalityHeader] names it, for callers that are all trusted.
//
// # Shadow mode
//
// [Layer.Shadow] runs a layer without enforcing it: it checks and counts
// every request as usual ([LayerStats], the Observer's events with
// Event.Shadow set, the RateLimit fields), but a request it would refuse
// goes on. Roll out a new limit in shadow first, watch what it would have
// refused, then enforce it.
//
// # Job workers
//
// [Workers] throttles job loops rather than requests: "export jobs start at
// most 5/s fleet-wide, smoothly; at most 8 run at once; interactive exports
// are never starved by background ones; shutdown drains". [NewWorkers] takes
// how many jobs may run at once in this process and a [WorkersConfig]:
// priority classes ([WorkerClass]) with reserved capacity (what a reservation
// protects, and from whom, is said once, in [WorkerClass.Reserved]) and a bounded
// backlog, a [Pacer] that spaces out starts (a shaper.Queue, or the
// fleet-wide Redis queue) and a gate shared beyond the process (a
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
