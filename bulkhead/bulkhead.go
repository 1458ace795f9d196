package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/shaper"
)

// A Rate decides whether key may spend n of a rate limit now. Every local
// shaper meter and shaper.Limiter (key ignored) have this method, and so do the
// Redis-backed meters. It returns (d, nil) when admitted; (d, err) when denied,
// err carrying RetryAfter (d.Err()); and (d, err) when it cannot decide: a cost
// above the burst, a store failure under FailClosed (breaker.ErrUnavailable),
// or ctx.Err(). d's Limit, Remaining and ResetAfter feed the RateLimit fields.
//
// A Rate that also has
//
//	Refund(ctx context.Context, key string, n int64, d shaper.Decision) error
//
// (every shaper meter, shaper.Limiter and shaperredis.Meter) is given back
// what it admitted when a later step refuses the request (see the package
// doc); an error matching errors.ErrUnsupported means it could not, any other
// error is counted in LayerStats.RefundErrors. A Rate without Refund stays
// charged.
type Rate interface {
	Admit(ctx context.Context, key string, n int64) (shaper.Decision, error)
}

// refunder is the optional shape of a Rate that can give back what an
// admission charged: every local shaper meter, shaper.Limiter and the
// shaperredis meters have it. When a request that a Rate admitted is refused by a later step (another
// layer's rate, a full gate, a store unavailable, a cancelled wait), bulkhead
// calls Refund with the admission's Decision, so the refusal costs no quota. A
// Rate without it, or whose Refund returns an error matching
// errors.ErrUnsupported, stays charged. Any other error of Refund (a store
// that could not be reached) never changes the answer; it is counted in
// LayerStats.RefundErrors.
type refunder interface {
	Refund(ctx context.Context, key string, n int64, d shaper.Decision) error
}

// keyChecker is the key rule of a Rate or KeyedGate with rules for its keys
// (distsem.Keyed, shaperredis.Meter): CheckKey returns, without I/O,
// the error the leaf would refuse key with, or nil. bulkhead asks it for
// every applicable layer before it charges any, so that a key a later leaf
// refuses never costs quota in an earlier one.
type keyChecker interface {
	CheckKey(key string) error
}

// A Layer is one check every request it applies to must pass: a rate, a
// concurrency gate, or both (rate first), under a key taken from the request's
// verified Identity.
type Layer struct {
	// Name names the layer in errors, Stats and the RateLimit fields. Required,
	// unique within a Config; a short token such as "tenant" or "export-pdf".
	Name string

	// Route, if set, limits the layer to the requests that an http.ServeMux
	// with only this pattern registered would dispatch to it: any ServeMux
	// pattern, "[METHOD ][HOST]/[PATH]" ("GET /items/{id}", "/files/{path...}",
	// "/{$}", "/static/", "POST example.com/upload"), matched as ServeMux
	// matches it: on the escaped path, segment by segment ("/items/a%2Fb" is
	// one {id}, "a/b"), "GET" also serving HEAD, the port ignored in the host.
	// A request ServeMux would redirect instead (an unclean path such as
	// "/a//b" or "/a/../b", or "/static" for "/static/") is not one the
	// layer applies to: it reaches no handler, and the layer applies to the
	// request that follows the redirect. Each layer routes on its own, as if
	// its pattern were alone in the mux: every layer whose pattern matches
	// applies, so a more specific pattern in the application's mux never
	// takes a request out of a broader layer (see Config.RouteByPattern for
	// the mux's own choice). Outside HTTP (Do without Request.HTTP),
	// Request.Method and Request.Path are routed as a request with that
	// method, that decoded URL path and no host. A pattern ServeMux rejects
	// panics in New. If empty, every request.
	Route string

	// Match, if non-nil, limits the layer further to the requests it accepts.
	// To select by path, prefer Route: Request.Path is the decoded, uncleaned
	// URL.Path ("/items/a%2Fb" reads "/items/a/b", "//items/7" is not
	// "/items/7"), not what ServeMux routes by.
	Match func(Request) bool

	// Key returns the key the layer's Rate and KeyedGate count under, from the
	// verified identity and the request (ByTenant, BySubject, or your own). If
	// nil, every request shares one key: a global limit. A Key that returns ""
	// or more than Config.MaxKeyLen bytes refuses the request (ErrInvalidKey,
	// before any layer is charged); any other byte string is a key. So is a
	// key that the layer's Rate or KeyedGate accepts: one that has a method
	// CheckKey(key string) error (distsem.Keyed, shaperredis.Meter) is asked
	// before any layer is charged, and a key it refuses refuses the request
	// with ErrInvalidKey, never with a 500 after earlier layers spent quota.
	//
	// The keys of anonymous identities (Config.Anonymous) are in a key space
	// of their own: whatever Key returns for one, it is never the key of a
	// verified identity (see Identity.Anonymous).
	Key func(Identity, Request) string

	// Rate, if non-nil, is checked first. With Tiers, it is the default for
	// tiers not in the map.
	Rate Rate

	// Tiers, if non-nil, picks the Rate by the identity's Tier: {"free":
	// 100/min, "gold": 1000/min}. A tier absent from Tiers uses Rate; if Rate
	// is nil too, the request is refused with ErrNoPolicy (403 by default).
	Tiers map[string]Rate

	// Gate or KeyedGate (at most one), if set, is held while the request
	// runs: any floodgate gate (semaphore.Weighted or distsem.Semaphore as a
	// Gate, semaphore.Keyed or distsem.Keyed as a KeyedGate, under the
	// layer's key). The context the gate's Held carries (for distsem,
	// cancelled when the lease is lost) is the one the later layers and the
	// handler or fn run under.
	Gate      floodgate.Gate
	KeyedGate floodgate.KeyedGate

	// N is what one request costs, in the Rate's units and the gate's weight.
	// If zero, 1. Negative panics in New.
	N int64

	// MaxWait bounds how long a request waits for the gate, on its own
	// context, as MaxWait means in every floodgate consumer. If zero, it
	// waits until its context is done. If positive, a request not granted
	// within MaxWait is refused with a *RejectError matching ErrMaxWait. If
	// negative, a request that finds no room is refused at once (the gate's
	// TryHold): with the gate's own refusal (semaphore.ErrNoCapacity,
	// distsem.ErrNoCapacity) and its RetryAfter estimate. With Classes, the
	// refusals are the layer's own instead (the first class's match
	// ErrMaxWait or have Reason no_capacity or queue_full; the others' match
	// ErrShed), with its own estimate: a class may be refused for another's
	// reservation while the gate has room.
	MaxWait time.Duration

	// Status is the HTTP status of this layer's rate and gate rejections. If
	// zero: 429 Too Many Requests when Key is set (the client's own quota),
	// 503 Service Unavailable when it is not (global saturation).
	Status int

	// RetryAfter is the retry delay given for a gate's rejection when the
	// gate gave no estimate. If zero, 1s.
	RetryAfter time.Duration

	// Classes, if set, are criticality classes at the layer's Gate, most
	// critical first: when the gate is saturated, a request waits only
	// behind requests of its own and more critical classes, each class
	// waits at most its own MaxWait and may have capacity reserved, and the
	// least critical are refused first, with ErrShed (503 and a Retry-After
	// estimate). A request's class is Config.Criticality's answer (by
	// default its Identity.Criticality); a request whose class the layer
	// does not have is in the last, least critical class. Classes need a
	// Gate (not a KeyedGate) with a Limit() int64 method, which every
	// floodgate gate has: reservations are counted against its limit,
	// read at each decision (an adaptive.Gate's moves). The gate stays the
	// one exact cap. The rules are bulkhead.Workers' (see
	// Criticality.Reserved). Panics in New: a class without a Name or with a
	// duplicate one, a negative Reserved or MaxQueue, reservations beyond
	// the gate's limit (its MaxLimit, for a gate that has one: an adaptive
	// gate's) or leaving a class no room for one request.
	Classes []Criticality

	// Shadow, if true, runs the layer without enforcing it: each request is
	// checked against the layer's rate and gate as usual, counted in Stats
	// and told to the Observer (with Event.Shadow set) and, with
	// Config.RateLimitFields, described in the RateLimit fields, but a
	// refusal lets the request go on instead (neither charged nor holding
	// the gate). A shadow gate never waits: a request that finds no room at
	// once counts as refused (no_capacity, or shed for a class). A request
	// the layer would have refused is counted in that refusal's counter and
	// in Admitted (it went on), and told as a Reject then an Admit. So a
	// team rolls out a limit and watches what it would have done before it
	// enforces it.
	Shadow bool
}

// DefaultMaxKeyLen is Config.MaxKeyLen's default.
const DefaultMaxKeyLen = 256

// maxInline is the number of layers an admission tracks without allocating.
const maxInline = 8

// Config configures a Bulkhead. The zero Config is valid and admits every
// identified request (no layers).
type Config struct {
	// Layers are checked in order; a request passes each layer that applies to
	// it. Order them from coarse to fine, for defense in depth: global cap, tenant
	// tier quota, route rates, route-per-tenant concurrency.
	Layers []Layer

	// Anonymous, if true, admits requests without an Identity under an identity
	// of their own, keyed by the client's address (see ClientAddr and
	// TrustedProxies) with Tier AnonymousTier, so that anonymous clients are
	// limited one by one and never pooled with each other or with a tenant.
	// If false, such requests are refused with ErrNoIdentity (401).
	Anonymous bool

	// AnonymousTier is the Tier of anonymous identities, for Layer.Tiers. If
	// empty, "anonymous".
	AnonymousTier string

	// TrustedProxies are the proxies whose X-Forwarded-For is believed when
	// finding an anonymous client's address. If empty, X-Forwarded-For is
	// ignored and the connection's peer address is the client.
	TrustedProxies []netip.Prefix

	// MaxKeyLen bounds the length of a layer's key. If zero,
	// DefaultMaxKeyLen.
	MaxKeyLen int

	// IdentityStatus is the status for ErrNoIdentity and ErrInvalidKey. If
	// zero, 401 Unauthorized.
	IdentityStatus int

	// NoPolicyStatus is the status for ErrNoPolicy. If zero, 403 Forbidden.
	NoPolicyStatus int

	// UnavailableStatus is the status when a layer's store is unavailable and
	// its policy refuses (breaker.ErrUnavailable). If zero, 503.
	UnavailableStatus int

	// RateLimitFields, if true, adds the RateLimit and RateLimit-Policy fields
	// of draft-ietf-httpapi-ratelimit-headers to responses, one list member
	// per rate layer the request was checked against, never more permissive
	// than the layer (see the package doc's RateLimit fields). Off by
	// default: the draft is not an RFC and the fields tell clients about your
	// quotas.
	RateLimitFields bool

	// RouteByPattern, if true, decides Layer.Route by the pattern the
	// ServeMux that dispatched the request chose (http.Request.Pattern), for a
	// Handler placed inside the mux, around the handlers it dispatches to
	// (mux.Handle(p, b.Handler(h))): a layer then applies exactly when
	// Pattern is its Route, written the same way, the mux's precedence
	// included ("GET /items/{id}" takes GET /items/7 from "/items/"). Pattern
	// is the innermost ServeMux's: with muxes nested, it names the inner
	// mux's pattern. A request with no Pattern (the Handler wraps the mux, or
	// Do without Request.HTTP) is routed as by default, so a misplaced
	// Handler limits more, never less.
	RouteByPattern bool

	// DegradedHeader, if set, names a response header that lists (comma
	// separated) the layers whose decision was degraded, that is made by a
	// fallback while the store was unavailable (FailOpen or FailLocal). For
	// operators; off by default.
	DegradedHeader string

	// Render, if non-nil, writes rejection responses instead of the default
	// JSON body. It is called before anything is written; Retry-After and the
	// RateLimit fields are already set on w's header. It must not write
	// err.Error() to the client.
	Render func(w http.ResponseWriter, r *http.Request, err *RejectError)

	// Criticality, if non-nil, names the criticality class of a request, for
	// the layers with Classes: from the verified identity or the route,
	// never from what a client claims. If nil, the identity's Criticality.
	Criticality func(Identity, Request) string

	// CriticalityHeader, if set, names a request header whose value is the
	// request's criticality class, taking precedence over Criticality. Any
	// client can write a header: set it only where every caller is trusted
	// (a service mesh or internal callers behind a proxy that strips it),
	// never on a public endpoint, or every client will claim the most
	// critical class.
	CriticalityHeader string

	// Observer, if non-nil, is told what each layer does, with Component
	// floodgate.ComponentBulkhead and Part the layer's Name: KindAdmit when a
	// request passes a layer (N the layer's N, Duration the time it waited
	// for the layer's gate, 0 when it was granted at once or the layer has
	// none), KindRelease when it gives the gate back, KindReject with the
	// RejectError's Reason and the *RejectError (Part "" for ErrNoIdentity),
	// and KindCancel when the request's context ended in the layer (Duration
	// the wait). It is called on the request's goroutine, without any lock
	// held. On a layer with Classes, Event.Class is the request's class; on
	// a Shadow layer, Event.Shadow is set (a Reject is what the layer would
	// have refused).
	Observer floodgate.Observer
}

// Bulkhead admits requests through ordered layers of rates and concurrency
// gates. Use New; a zero Bulkhead admits every identified request. A Bulkhead
// is safe for simultaneous use by multiple goroutines.
//
// (It is not called Policy: in floodgate "policy" is what a store-backed
// limiter does when the store fails.)
type Bulkhead struct {
	layers        []layer
	anonymous     bool
	anonTier      string
	trusted       []netip.Prefix
	maxKeyLen     int
	identStatus   int
	noPolicyStat  int
	unavailStatus int
	rateFields    bool
	byPattern     bool
	routed        bool // some layer has a Route
	degradedHdr   string
	critical      func(Identity, Request) string
	critHeader    string
	classed       bool // some layer has Classes
	render        func(http.ResponseWriter, *http.Request, *RejectError)
	observer      floodgate.Observer

	noIdentity atomic.Uint64
	invalidKey atomic.Uint64
	noPolicy   atomic.Uint64
	unmatched  atomic.Uint64
}

type layer struct {
	Layer
	gate     floodgate.KeyedGate // Gate or KeyedGate, one path; nil if neither
	gateKeys keyChecker          // KeyedGate's CheckKey, if it has one
	route    *route
	shed     *shedder // Classes; nil if none
	n        int64
	status   int
	retry    time.Duration
	waits    gatewait.Waits
	stats    layerCounters
}

type layerCounters struct {
	admitted, limited, noCapacity, maxWait, shed, unavailable, errors, canceled, degraded atomic.Uint64
	refunds, refundErrors                                                                 atomic.Uint64
	inFlight                                                                              atomic.Int64
}

// New returns a Bulkhead for cfg. It panics on a programmer error in cfg: a
// layer without a Name or with a duplicate one, with neither a rate nor a gate,
// with both Gate and KeyedGate, with a negative N, or with a malformed Route.
func New(cfg Config) *Bulkhead {
	b := &Bulkhead{
		anonymous:     cfg.Anonymous,
		anonTier:      cmp(cfg.AnonymousTier, "anonymous"),
		trusted:       append([]netip.Prefix(nil), cfg.TrustedProxies...),
		maxKeyLen:     cmp(cfg.MaxKeyLen, DefaultMaxKeyLen),
		identStatus:   cmp(cfg.IdentityStatus, http.StatusUnauthorized),
		noPolicyStat:  cmp(cfg.NoPolicyStatus, http.StatusForbidden),
		unavailStatus: cmp(cfg.UnavailableStatus, http.StatusServiceUnavailable),
		rateFields:    cfg.RateLimitFields,
		byPattern:     cfg.RouteByPattern,
		degradedHdr:   cfg.DegradedHeader,
		render:        cfg.Render,
		observer:      cfg.Observer,
		critical:      cfg.Criticality,
		critHeader:    cfg.CriticalityHeader,
		layers:        make([]layer, len(cfg.Layers)),
	}
	seen := make(map[string]bool)
	for i, l := range cfg.Layers {
		if l.Name == "" {
			panic("bulkhead: layer without a Name")
		}
		if seen[l.Name] {
			panic("bulkhead: layer " + l.Name + ": duplicate Name")
		}
		seen[l.Name] = true
		b.layers[i].init(l)
		b.routed = b.routed || l.Route != ""
		b.classed = b.classed || l.Classes != nil
	}
	return b
}

// init makes l the layer ly, with its defaults, panicking on a programmer
// error in l (see New).
func (ly *layer) init(l Layer) {
	what := "bulkhead: layer " + l.Name + ": "
	switch {
	case l.Rate == nil && l.Tiers == nil && l.Gate == nil && l.KeyedGate == nil:
		panic(what + "no Rate, Tiers, Gate or KeyedGate")
	case l.Gate != nil && l.KeyedGate != nil:
		panic(what + "both Gate and KeyedGate")
	case l.N < 0:
		panic(what + "negative N")
	}
	if l.Tiers != nil {
		l.Tiers = maps.Clone(l.Tiers)
	}
	ly.Layer = l
	ly.n = cmp(l.N, 1)
	ly.retry = cmp(l.RetryAfter, time.Second)
	ly.status = l.Status
	if ly.status == 0 {
		ly.status = http.StatusServiceUnavailable
		if l.Key != nil {
			ly.status = http.StatusTooManyRequests
		}
	}
	if l.Route != "" {
		ly.route = parseRoute(l.Name, l.Route)
	}
	ly.gate = gatewait.Keyed(l.Gate, l.KeyedGate)
	if l.Classes != nil {
		ly.shed = newShedder(what, l, ly.n, ly.retry, &ly.waits)
	}
	ly.gateKeys, _ = l.KeyedGate.(keyChecker)
	if l.Key == nil {
		// Every request has the key "": a leaf that refuses it would
		// refuse every request.
		err := ly.checkKey(l.Rate, "")
		for _, r := range l.Tiers {
			if err == nil {
				err = ly.checkKey(r, "")
			}
		}
		if err != nil {
			panic(what + "no Key, and a leaf refuses the key \"\" of every request: " + err.Error())
		}
	}
}

// checkKey asks rate and the layer's KeyedGate whether they accept key, for
// the leaves that have key rules (keyChecker). A refusal is returned as an
// error matching ErrInvalidKey and the leaf's own error.
func (l *layer) checkKey(rate Rate, key string) error {
	if c, ok := rate.(keyChecker); ok {
		if err := c.CheckKey(key); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidKey, err)
		}
	}
	if l.gateKeys != nil {
		if err := l.gateKeys.CheckKey(key); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidKey, err)
		}
	}
	return nil
}

// anonPrefix starts the Tenant and Subject of an anonymous identity, and the
// key space of anonymous identities (see keyOf).
const anonPrefix = "addr:"

// keyOf returns the key a layer's leaves count under when its Key returned
// k (not empty) for an identity: k itself, except that the keys of
// anonymous and verified identities live in disjoint key spaces.
//
//   - anonymous: k if it starts with "addr:" not followed by the byte 0xFF
//     (ByTenant's and BySubject's "addr:<ip>"), else "addr:\xff" + k;
//   - verified: k, unless it starts with "addr:" or with 0xFF: then "\xff" + k.
//
// Every anonymous key starts with "addr:" and no verified key does; each map
// is injective (its two branches have disjoint images: "addr:" followed by
// 0xFF or not; first byte 0xFF or not). The keys that earlier releases used
// stay the same, except a verified key starting with "addr:", which shared
// an anonymous client's quota (0xFF never starts valid UTF-8 text).
func keyOf(k string, anonymous bool) string {
	prefixed := strings.HasPrefix(k, anonPrefix)
	if anonymous {
		if prefixed && (len(k) == len(anonPrefix) || k[len(anonPrefix)] != 0xff) {
			return k
		}
		return anonPrefix + "\xff" + k
	}
	if prefixed || k[0] == 0xff {
		return "\xff" + k
	}
	return k
}

func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// A step is one applicable layer of one admission.
type step struct {
	l     *layer
	key   string
	rate  Rate
	d     shaper.Decision
	hasD  bool
	h     floodgate.Held // the layer's gate, while held is set
	held  bool
	class int // the request's criticality class at l.shed
	// charged is set when rate admitted the request: a refusal after it
	// refunds the admission (see refunder).
	charged bool
}

// plan is an admission's applicable layers, on the caller's stack: the first
// maxInline inline (no slice into itself, which would make it escape), the
// rest in extra.
type plan struct {
	n      int
	inline [maxInline]step
	extra  []step
}

func (p *plan) len() int { return p.n }

func (p *plan) at(i int) *step {
	if i < maxInline {
		return &p.inline[i]
	}
	return &p.extra[i-maxInline]
}

func (p *plan) add(s step) {
	if p.n < maxInline {
		p.inline[p.n] = s
	} else {
		p.extra = append(p.extra, s)
	}
	p.n++
}

// an invocation is what runs once every layer admitted: fn, or an HTTP handler.
type invocation struct {
	fn func(context.Context) error
	h  http.Handler
	w  http.ResponseWriter
	r  *http.Request
	// ran is set when h is called: after that the response is h's.
	ran bool
	// served is set when fn or h is called: the request was admitted and
	// its quota is spent, whatever fn or h then does.
	served bool
}

// Do runs fn if req passes every layer that applies to it, holding the layers'
// gates until fn returns (or panics), and returns fn's error. The identity is
// IdentityFrom(ctx). If the request is refused, Do returns a *RejectError
// without calling fn; if ctx ends while waiting for a gate, ctx.Err(). A
// refused request gives back the rate quota that earlier layers charged it
// (see the package doc) and the gate weight it held.
func (b *Bulkhead) Do(ctx context.Context, req Request, fn func(context.Context) error) error {
	var p plan
	if err := b.prepare(ctx, req, &p); err != nil {
		return err
	}
	return b.exec(ctx, &p, &invocation{fn: fn})
}

// prepare resolves the identity and the applicable layers' keys and rates,
// refusing bad input before any layer is charged.
func (b *Bulkhead) prepare(ctx context.Context, req Request, p *plan) *RejectError {
	var id Identity
	if !b.identity(ctx, &req, &id) {
		b.noIdentity.Add(1)
		return b.reject(nil, floodgate.ReasonNoIdentity, b.identStatus, 0, 0, ErrNoIdentity)
	}
	critical := ""
	if b.classed {
		critical = b.criticality(id, req)
	}
	var t target
	pattern := ""
	if b.routed {
		t = targetOf(&req)
		if b.byPattern && req.HTTP != nil {
			pattern = req.HTTP.Pattern
		}
	}
	for i := range b.layers {
		l := &b.layers[i]
		if l.route != nil && !l.route.applies(&t, pattern) || l.Match != nil && !l.Match(req) {
			continue
		}
		s := step{l: l, rate: l.Rate}
		if l.shed != nil {
			s.class = l.shed.class(critical)
		}
		if l.Key != nil {
			k := l.Key(id, req)
			if k == "" || len(k) > b.maxKeyLen {
				b.invalidKey.Add(1)
				return b.reject(l, floodgate.ReasonInvalidKey, b.identStatus, 0, 0, ErrInvalidKey)
			}
			s.key = keyOf(k, id.Anonymous)
		}
		if l.Tiers != nil {
			if r, ok := l.Tiers[id.Tier]; ok {
				s.rate = r
			} else if l.Rate == nil {
				b.noPolicy.Add(1)
				return b.reject(l, floodgate.ReasonNoPolicy, b.noPolicyStat, 0, 0, ErrNoPolicy)
			}
		}
		if l.Key != nil {
			// The leaves' own key rules, before any layer is charged.
			if err := l.checkKey(s.rate, s.key); err != nil {
				b.invalidKey.Add(1)
				return b.reject(l, floodgate.ReasonInvalidKey, b.identStatus, 0, 0, err)
			}
		}
		p.add(s)
	}
	if p.len() == 0 {
		b.unmatched.Add(1)
	}
	return nil
}

// identity sets *id to the request's identity: the verified one in ctx, or,
// with Config.Anonymous, one of its own keyed by the client's address. It
// reports false when there is neither.
func (b *Bulkhead) identity(ctx context.Context, req *Request, id *Identity) bool {
	if v, ok := ctx.Value(identityKey{}).(Identity); ok {
		*id = v
		id.Anonymous = false // only bulkhead makes anonymous identities
		return true
	}
	if !b.anonymous || req.HTTP == nil {
		return false
	}
	a := ClientAddr(req.HTTP, b.trusted)
	if !a.IsValid() {
		return false
	}
	key := anonPrefix + a.String()
	*id = Identity{Tenant: key, Subject: key, Tier: b.anonTier, Anonymous: true}
	return true
}

// exec passes every step of p and then runs inv, under the context of the
// gates it holds. When it returns or panics, it gives back the gates it
// took, last first, and, when the request is refused before inv was called,
// refunds the rates it charged.
func (b *Bulkhead) exec(ctx context.Context, p *plan, inv *invocation) (err error) {
	i, returned := 0, false
	defer func() {
		last := min(i, p.len()-1)
		b.release(p, last)
		// After the gates, so that a refund's round trip holds none. A
		// panic before inv was called (a Rate's, a gate's, an Observer's)
		// is a refusal too: !returned.
		if (err != nil || !returned) && !inv.served {
			b.refund(ctx, p, 0, last)
		}
	}()
	wctx := ctx
	for ; i < p.len(); i++ {
		s := p.at(i)
		if err := b.admit(wctx, s); err != nil {
			returned = true
			return err
		}
		if s.held {
			wctx = s.h.Context()
		}
	}
	returned = true // a panic in inv is after it was served: no refund
	return inv.call(wctx, b, p)
}

// admit passes step s: its rate, then its gate, taken with gatewait.Take
// under the layer's MaxWait (or by the layer's criticality classes). On a
// Shadow layer a refusal is counted and told, and the request goes on.
func (b *Bulkhead) admit(ctx context.Context, s *step) error {
	l := s.l
	rateRefused := false
	if s.rate != nil {
		d, err := s.rate.Admit(ctx, s.key, l.n)
		s.d, s.hasD = d, true
		if d.Degraded {
			l.stats.degraded.Add(1)
		}
		if err != nil {
			if err = b.rateError(ctx, s, err); !l.Shadow || ctx.Err() != nil {
				return err
			}
			rateRefused = true // a real layer stops here: so does its shadow
		}
		s.charged = d.Allowed
	}
	var waited time.Duration
	if l.gate != nil && !rateRefused {
		var h floodgate.Held
		var err error
		switch {
		case l.shed != nil && l.Shadow:
			h, err = l.shed.shadow(ctx, s.class)
		case l.shed != nil:
			h, waited, err = l.shed.take(ctx, s.class, l.classWait(s.class))
		case l.Shadow:
			h, _, err = gatewait.Take(ctx, l.gate, s.key, l.n, -1, nil, nil)
		default:
			h, waited, err = gatewait.Take(ctx, l.gate, s.key, l.n, l.MaxWait, ErrMaxWait, &l.waits)
		}
		if err != nil {
			if err = b.gateError(ctx, s, waited, err); !l.Shadow || ctx.Err() != nil {
				return err
			}
			b.refundStep(ctx, s) // as a real layer refused by its gate is refunded
		} else {
			s.h, s.held = h, true
			l.stats.inFlight.Add(1)
		}
	}
	l.stats.admitted.Add(1)
	if b.observer != nil {
		b.observe(s, floodgate.Event{Kind: floodgate.KindAdmit, N: l.n, Duration: waited})
	}
	return nil
}

// classWait is the MaxWait of class c of l's Classes.
func (l *layer) classWait(c int) time.Duration {
	if w := l.shed.classes[c].MaxWait; w != 0 {
		return w
	}
	return l.MaxWait
}

// criticality returns the criticality class of a request with identity id.
func (b *Bulkhead) criticality(id Identity, req Request) string {
	if b.critHeader != "" && req.HTTP != nil {
		if v := req.HTTP.Header.Get(b.critHeader); v != "" {
			return v
		}
	}
	if b.critical != nil {
		return b.critical(id, req)
	}
	return id.Criticality
}

// release gives back the gates that steps last down to 0 hold.
func (b *Bulkhead) release(p *plan, last int) {
	for j := last; j >= 0; j-- {
		s := p.at(j)
		if !s.held {
			continue
		}
		s.held = false
		s.h.Release()
		if s.l.shed != nil {
			s.l.shed.done(s.class)
		}
		s.l.stats.inFlight.Add(-1)
		if b.observer != nil {
			b.observe(s, floodgate.Event{Kind: floodgate.KindRelease, N: s.l.n})
		}
	}
}

// observe sends e, from the bulkhead, to the Observer (which is set), about
// step s (nil: the request itself): its layer, class and shadow mode.
func (b *Bulkhead) observe(s *step, e floodgate.Event) {
	e.Component = floodgate.ComponentBulkhead
	if s != nil {
		e.Part = s.l.Name
		e.Shadow = s.l.Shadow
		if s.l.shed != nil {
			e.Class = s.l.shed.classes[s.class].Name
		}
	}
	b.observer.Observe(e)
}

// reject returns the refusal of layer l (nil for the request itself) with
// reason and status, whose Err is err, wrapped to name the layer, and tells
// the Observer.
func (b *Bulkhead) reject(l *layer, reason floodgate.Reason, status int, delay time.Duration, waited time.Duration, err error) *RejectError {
	var s *step
	if l != nil {
		s = &step{l: l}
	}
	return b.rejectStep(s, reason, status, delay, waited, err)
}

// rejectStep is reject for the step s of a request (nil: the request
// itself).
func (b *Bulkhead) rejectStep(s *step, reason floodgate.Reason, status int, delay time.Duration, waited time.Duration, err error) *RejectError {
	re := &RejectError{Reason: reason, Status: status, Delay: delay, Err: err}
	var n int64
	if s != nil {
		re.Layer, n = s.l.Name, s.l.n
		re.Err = fmt.Errorf("bulkhead: %s: %w", s.l.Name, err)
	}
	if b.observer != nil {
		b.observe(s, floodgate.Event{Kind: floodgate.KindReject, N: n, Reason: reason, Duration: waited, Err: re})
	}
	return re
}

// canceled records that the request's context ended in step s, after
// waiting waited, and returns err (the context's error).
func (b *Bulkhead) canceled(s *step, waited time.Duration, err error) error {
	s.l.stats.canceled.Add(1)
	if b.observer != nil {
		b.observe(s, floodgate.Event{Kind: floodgate.KindCancel, N: s.l.n, Duration: waited})
	}
	return err
}

// gateError turns the refusal of l's gate, after waiting waited, into the
// admission's error: ctx.Err() if the request's own context ended, else a
// *RejectError with the refusal's word (max_wait for ErrMaxWait; the gate's
// own, no_capacity, queue_full, ..., for its refusals).
func (b *Bulkhead) gateError(ctx context.Context, s *step, waited time.Duration, err error) error {
	l := s.l
	if ctx.Err() != nil {
		return b.canceled(s, waited, ctx.Err())
	}
	if errors.Is(err, breaker.ErrUnavailable) {
		l.stats.unavailable.Add(1)
		return b.rejectStep(s, floodgate.ReasonUnavailable, b.unavailStatus, retryAfter(err, l.retry), waited, err)
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.Is(err, ErrMaxWait) && !errors.As(err, &ra) {
		l.stats.errors.Add(1)
		return b.rejectStep(s, floodgate.ReasonError, http.StatusInternalServerError, 0, waited, err)
	}
	reason, status := reject.ReasonOf(err), l.status
	switch reason {
	case floodgate.ReasonMaxWait:
		l.stats.maxWait.Add(1)
	case floodgate.ReasonShed:
		l.stats.shed.Add(1)
		status = http.StatusServiceUnavailable
	case floodgate.ReasonError: // a refusal with a delay and no word of its own
		reason = floodgate.ReasonNoCapacity
		fallthrough
	default:
		l.stats.noCapacity.Add(1)
	}
	return b.rejectStep(s, reason, status, retryAfter(err, l.retry), waited, err)
}

// rateError turns a Rate's error into the admission's error.
func (b *Bulkhead) rateError(ctx context.Context, s *step, err error) error {
	l := s.l
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return b.canceled(s, 0, err)
	case errors.Is(err, breaker.ErrUnavailable):
		l.stats.unavailable.Add(1)
		return b.rejectStep(s, floodgate.ReasonUnavailable, b.unavailStatus, retryAfter(err, l.retry), 0, err)
	case errors.Is(err, shaper.ErrLimited):
		l.stats.limited.Add(1)
		return b.rejectStep(s, floodgate.ReasonLimited, l.status, retryAfter(err, l.retry), 0, err)
	default: // too large for the meter, or a failure its policy did not resolve
		l.stats.errors.Add(1)
		return b.rejectStep(s, floodgate.ReasonError, http.StatusInternalServerError, 0, 0, err)
	}
}

// retryAfter returns err's RetryAfter, or def when it has none or it is 0.
func retryAfter(err error, def time.Duration) time.Duration {
	if d := reject.RetryAfter(err); d > 0 {
		return d
	}
	return def
}

// refund gives back, last first, the admissions of steps last down to first
// that charged a Rate, for a request refused after them. It runs even if ctx
// is done (a cancelled request still gets its quota back), without ctx's
// cancellation; each Rate bounds its own store call.
func (b *Bulkhead) refund(ctx context.Context, p *plan, first, last int) {
	for j := last; j >= first; j-- {
		b.refundStep(ctx, p.at(j))
	}
}

// refundStep gives back step s's rate charge, if it has one its Rate can
// give back.
func (b *Bulkhead) refundStep(ctx context.Context, s *step) {
	if !s.charged {
		return
	}
	s.charged = false
	r, ok := s.rate.(refunder)
	if !ok {
		return
	}
	if err := r.Refund(context.WithoutCancel(ctx), s.key, s.l.n, s.d); errors.Is(err, errors.ErrUnsupported) {
		return // this Rate cannot give back: it stays charged
	} else if err != nil {
		s.l.stats.refundErrors.Add(1)
	} else {
		s.l.stats.refunds.Add(1)
	}
}

func (inv *invocation) call(ctx context.Context, b *Bulkhead, p *plan) error {
	inv.served = true
	if inv.fn != nil {
		return inv.fn(ctx)
	}
	b.writeFields(inv.w, p, nil)
	inv.ran = true
	r := inv.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	inv.h.ServeHTTP(inv.w, r)
	return nil
}
