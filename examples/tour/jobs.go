package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/shaper"
)

type job struct {
	title string
	run   func(ctx context.Context, cfg config, bs []*backend, p *progress) (*table, error)
}

var jobs = []job{
	{"report queries: at most 4 at once, a caller waits at most 100ms", poolJob},
	{"export workers: start 20/s smoothly, 4 at once, backlog of 10", workersJob},
	{"PDF export handler: 5/min and 2 at once per tenant, 429 over that", httpJob},
}

// poolJob is job 1, wrapping a database pool: 16 callers run a fake 50ms
// "expensive query" (a sleep) behind a gate of 4, each waiting at most 150ms
// for a slot; who waits longer fails fast instead of piling up.
func poolJob(ctx context.Context, cfg config, bs []*backend, p *progress) (*table, error) {
	const limit, callers, query, maxWait, think = 4, 10, 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond
	cols := make([]*column, len(bs))
	var wg sync.WaitGroup
	end := time.Now().Add(cfg.Duration)
	for ci, b := range bs {
		col := newColumn(b.name, cfg.Pods)
		cols[ci] = col
		gates := make([]bulkhead.Gate, cfg.Pods)
		for pod := range gates {
			gates[pod] = b.gate(pod, "reports", limit)
		}
		for i := range callers {
			pod := i % cfg.Pods
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					t0 := time.Now()
					actx, cancel := context.WithTimeout(ctx, maxWait)
					err := gates[pod].Do(actx, 1, func(context.Context) error {
						col.started(pod, time.Since(t0))
						col.peak.enter()
						time.Sleep(query) // the fake expensive query
						col.peak.leave()
						return nil
					})
					cancel()
					if err != nil && ctx.Err() == nil {
						col.rejected.Add(1)
					}
					examplekit.Sleep(ctx, think)
				}
			})
		}
	}
	p.watch(cols)
	wg.Wait()
	var t table
	t.note = (fmt.Sprintf("%d at once, max wait %v, %d callers, 50ms queries", limit, maxWait, callers))
	t.standard(cols, limit)
	return &t, nil
}

// workersJob is job 2, throttling job workers: export jobs (150ms each) are
// submitted at 30/s, above the 20/s start rate, into bulkhead.Workers whose
// backlog holds 10; the rest is refused with a RetryAfter.
func workersJob(ctx context.Context, cfg config, bs []*backend, p *progress) (*table, error) {
	const rate, limit, maxQueue, work, submitRate = 20, 4, 10, 150 * time.Millisecond, 30
	cols := make([]*column, len(bs))
	pools := make([][]*bulkhead.Workers, len(bs))
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for ci, b := range bs {
		cols[ci] = newColumn(b.name, cfg.Pods)
		for pod := range cfg.Pods {
			pace, closePace := b.pacer(pod, "exports", shaper.PerSecond(rate))
			closers = append(closers, closePace)
			wc := bulkhead.WorkersConfig{
				Classes: []bulkhead.Class{{Name: "exports", MaxQueue: maxQueue}},
				Pace:    pace,
			}
			if b.shared {
				wc.Gate = b.gate(pod, "export-workers", limit) // the cap for the fleet
			}
			pools[ci] = append(pools[ci], bulkhead.NewWorkers(limit, wc))
		}
	}
	p.watch(cols)
	tick := time.NewTicker(time.Second / submitRate)
	end := time.Now().Add(cfg.Duration)
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		pod := i % cfg.Pods
		for ci, col := range cols {
			t0 := time.Now()
			err := pools[ci][pod].Submit(ctx, "exports", func(ctx context.Context) error {
				col.started(pod, time.Since(t0))
				col.peak.enter()
				examplekit.Sleep(ctx, work)
				col.peak.leave()
				return nil
			})
			if err != nil {
				col.rejected.Add(1)
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, ws := range pools {
		for _, w := range ws {
			if err := w.Shutdown(sctx); err != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("shutdown: %w", err)
			}
		}
	}
	var t table
	t.note = (fmt.Sprintf("%d/s starts, %d at once, backlog %d per process, %d jobs/s submitted", rate, limit, maxQueue, submitRate))
	t.standard(cols, limit)
	t.addCols("start rate", cols, func(c *column) string { return fmt.Sprintf("%.1f/s (limit %d/s)", c.startRate(), rate) })
	return &t, nil
}

// A tenant of job 3, with the demo API key its clients send.
type tenant struct{ name, tier, key string }

var tenants = []tenant{{"acme", "gold", "key-acme"}, {"globex", "free", "key-globex"}}

// httpJob is job 3, guarding an expensive HTTP handler: 3 clients per tenant
// each POST /reports/export-pdf every 50ms to a bulkhead in front of a 300ms
// handler (a real in-process HTTP server per pod), through layers: a global
// cap (8, 503), the tenant's tier (free 100/min, gold 1000/min) and the
// export route (5/min, 2 at once per tenant).
func httpJob(ctx context.Context, cfg config, bs []*backend, p *progress) (*table, error) {
	const perTenant, clientsPerTenant, every, work = 2, 3, 50 * time.Millisecond, 300 * time.Millisecond
	exportLimit := shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5}
	type result struct {
		col      *column
		heads    []*bulkhead.Bulkhead
		perTen   map[string]*gauge
		admitted map[string]*atomic.Int64
		servers  []*httptest.Server
	}
	var sample atomic.Pointer[string]
	res := make([]*result, len(bs))
	defer func() {
		for _, r := range res {
			if r != nil {
				for _, s := range r.servers {
					s.Close()
				}
			}
		}
	}()
	for ci, b := range bs {
		r := &result{col: newColumn(b.name, cfg.Pods), perTen: map[string]*gauge{}, admitted: map[string]*atomic.Int64{}}
		res[ci] = r
		for _, tn := range tenants {
			r.perTen[tn.name], r.admitted[tn.name] = new(gauge), new(atomic.Int64)
		}
		for pod := range cfg.Pods {
			bh := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
				{Name: "global", Gate: b.gate(pod, "global", 8), MaxWait: 100 * time.Millisecond},
				{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{
					"free": b.rate(pod, "tier-free", shaper.Limit{Rate: shaper.PerMinute(100)}),
					"gold": b.rate(pod, "tier-gold", shaper.Limit{Rate: shaper.PerMinute(1000)}),
				}},
				{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant,
					Rate: b.rate(pod, "export", exportLimit), KeyedGate: b.keyed(pod, "export-running", perTenant), MaxWait: 2 * time.Second},
			}})
			r.heads = append(r.heads, bh)
			export := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				sent, _ := strconv.ParseInt(req.Header.Get("X-Sent"), 10, 64)
				r.col.started(pod, time.Since(time.Unix(0, sent)))
				id, _ := bulkhead.IdentityFrom(req.Context())
				r.admitted[id.Tenant].Add(1)
				g := r.perTen[id.Tenant]
				g.enter()
				r.col.peak.enter()
				time.Sleep(work) // rendering the PDF
				r.col.peak.leave()
				g.leave()
				w.Write([]byte("%PDF-1.7 ...\n"))
			})
			r.servers = append(r.servers, httptest.NewServer(demoAuth(bh.Handler(export))))
		}
	}
	cols := make([]*column, len(res))
	for i, r := range res {
		cols[i] = r.col
	}
	p.watch(cols)

	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	end := time.Now().Add(cfg.Duration)
	var errOnce sync.Once
	var clientErr error
	for _, r := range res {
		for _, tn := range tenants {
			for c := range clientsPerTenant {
				wg.Go(func() {
					for i := c; time.Now().Before(end) && ctx.Err() == nil; i++ {
						srv := r.servers[i%cfg.Pods]
						req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/reports/export-pdf", nil)
						req.Header.Set("X-API-Key", tn.key)
						req.Header.Set("X-Sent", strconv.FormatInt(time.Now().UnixNano(), 10))
						resp, err := client.Do(req)
						if err != nil {
							if ctx.Err() == nil {
								errOnce.Do(func() { clientErr = err })
							}
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							r.col.rejected.Add(1)
						}
						if resp.StatusCode == http.StatusTooManyRequests && sample.Load() == nil {
							s := fmt.Sprintf("%s %s\nRetry-After: %s\nContent-Type: %s\n\n%s",
								resp.Proto, resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), strings.TrimSpace(string(body)))
							sample.CompareAndSwap(nil, &s)
						}
						examplekit.Sleep(ctx, every)
					}
				})
			}
		}
	}
	wg.Wait()
	if clientErr != nil {
		return nil, clientErr
	}
	var t table
	t.note = "export 5/min and 2 at once per tenant; tiers free 100/min, gold 1000/min; global 8 at once"
	t.standard(cols, perTenant*int64(len(tenants)))
	t.addEach("per tenant admitted", cols, func(i int, _ *column) string {
		r := res[i]
		var parts []string
		for _, tn := range tenants {
			parts = append(parts, fmt.Sprintf("%s %d", tn.name, r.admitted[tn.name].Load()))
		}
		return strings.Join(parts, ", ")
	})
	t.addEach("per tenant peak", cols, func(i int, _ *column) string {
		r := res[i]
		var m int64
		for _, g := range r.perTen {
			m = max(m, g.max.Load())
		}
		return fmt.Sprintf("%d / cap %d", m, perTenant)
	})
	t.addEach("rejected by layer", cols, func(i int, _ *column) string {
		r := res[i]
		by := map[string]uint64{}
		for _, h := range r.heads {
			for _, l := range h.Stats().Layers {
				by[l.Name] += l.Limited + l.Concurrency + l.Unavailable + l.Errors
			}
		}
		return fmt.Sprintf("global %d, tier %d, export %d", by["global"], by["tier"], by["export"])
	})
	if s := sample.Load(); s != nil {
		t.trailer = append(t.trailer, "sample 429 response ("+res[len(res)-1].col.name+"):")
		for line := range strings.Lines(*s) {
			t.trailer = append(t.trailer, "  "+strings.TrimRight(line, "\n"))
		}
	} else {
		t.trailer = append(t.trailer, "sample 429 response: none (no request was over its quota)")
	}
	return &t, nil
}

// demoAuth stands in for real authentication: it looks the X-API-Key header up
// in a static table and puts the verified identity in the request's context.
// The bulkhead keys every quota on that identity, never on a header value.
func demoAuth(next http.Handler) http.Handler {
	ids := map[string]bulkhead.Identity{}
	for _, tn := range tenants {
		ids[tn.key] = bulkhead.Identity{Tenant: tn.name, Tier: tn.tier, Subject: tn.key}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := ids[r.Header.Get("X-API-Key")]
		if !ok {
			http.Error(w, "unknown API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(bulkhead.WithIdentity(r.Context(), id)))
	})
}
