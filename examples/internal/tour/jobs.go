package tour

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	floodgate "github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/shaper"
)

type job struct {
	title string
	run   func(ctx context.Context, cfg Config, bs []*Backend, p *progress) (*table, error)
}

// The README's three jobs, with its numbers (readme_test.go checks them
// against README.md).
const (
	// Job 1: at most 50 report queries at once; one that cannot start within
	// 2 s fails fast.
	reportsCap     = 50
	reportsMaxWait = 2 * time.Second

	// Job 2: exports start at most 5/s, 8 at once; interactive has 2 of the 8
	// reserved and a backlog of 100, background a backlog of 1000.
	exportRate        = 5
	exportCap         = 8
	interactiveRsv    = 2
	interactiveQueue  = 100
	backgroundQueue   = 1000
	exportJobDuration = 2 * time.Second

	// Job 3: global 200 at once (waiting up to 1 s); tiers free 100/min and
	// gold 1000/min; exports 5/min and 2 at once per tenant, never queued.
	globalCap                            = 200
	globalMaxWait                        = time.Second
	freePerMin, goldPerMin               = 100, 1000
	pdfPerMin, pdfRunning                = 5, 2
	pdfMaxWait             time.Duration = -1
)

var jobs = []job{
	{fmt.Sprintf("report queries: at most %d at once, a query that cannot start within %v fails fast", reportsCap, reportsMaxWait), poolJob},
	{fmt.Sprintf("export workers: start %d/s smoothly, %d at once, %d reserved for interactive jobs", exportRate, exportCap, interactiveRsv), workersJob},
	{fmt.Sprintf("PDF export handler: %d/min and %d at once per tenant, 429 over that", pdfPerMin, pdfRunning), httpJob},
}

// poolJob is job 1, wrapping a database pool: 160 callers run a fake 1s
// "expensive query" (a sleep) behind a gate of 50, each waiting at most 2s
// for a slot; who would wait longer fails fast instead of piling up, and
// comes back after the refusal's RetryAfter, as a client answered 503 would.
func poolJob(ctx context.Context, cfg Config, bs []*Backend, p *progress) (*table, error) {
	const callers, query, think = 160, time.Second, 10 * time.Millisecond
	cols := make([]*column, len(bs))
	var wg sync.WaitGroup
	end := time.Now().Add(cfg.Duration)
	for ci, b := range bs {
		col := newColumn(b.Name, cfg.Pods)
		cols[ci] = col
		gates := make([]floodgate.Gate, cfg.Pods)
		for pod := range gates {
			gates[pod] = b.Gate(pod, "reports", reportsCap)
		}
		for i := range callers {
			pod := i % cfg.Pods
			wg.Go(func() {
				// Callers arrive over 160ms, as requests do, rather than
				// in one instant.
				examplekit.Sleep(ctx, time.Duration(i)*time.Millisecond)
				for time.Now().Before(end) && ctx.Err() == nil {
					t0 := time.Now()
					actx, cancel := context.WithTimeout(ctx, reportsMaxWait)
					h, err := gates[pod].Hold(actx, 1)
					if err == nil {
						col.started(pod, time.Since(t0))
						col.peak.enter()
						time.Sleep(query) // the fake expensive query
						col.peak.leave()
						h.Release()
					}
					cancel()
					wait := think
					if err != nil && ctx.Err() == nil {
						col.rejected.Add(1)
						var ra interface{ RetryAfter() time.Duration }
						if errors.As(err, &ra) {
							wait = max(wait, ra.RetryAfter())
						}
					}
					examplekit.Sleep(ctx, wait)
				}
			})
		}
	}
	p.watch(cols)
	wg.Wait()
	var t table
	t.note = fmt.Sprintf("%d at once, max wait %v, %d callers, %v queries", reportsCap, reportsMaxWait, callers, query)
	t.standard(cols, reportsCap)
	return &t, nil
}

// workersJob is job 2, throttling job workers: background export jobs (2s
// each) are submitted at 4/s and interactive ones at 1/s, as fast as the 5/s
// start rate but more than 8 at once can run, into bulkhead.Workers with the README's two classes; interactive jobs
// start ahead of the background backlog, and background jobs never take a
// pod's last 2 slots. Shutdown drains the backlog.
func workersJob(ctx context.Context, cfg Config, bs []*Backend, p *progress) (*table, error) {
	const bgRate, iaEvery = 4, 4 // every 5th submission is interactive: 1/s of 5/s
	cols := make([]*column, len(bs))
	pools := make([][]*bulkhead.Workers, len(bs))
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for ci, b := range bs {
		cols[ci] = newColumn(b.Name, cfg.Pods)
		for pod := range cfg.Pods {
			pace, closePace := b.Pacer(pod, "exports", shaper.PerSecond(exportRate))
			closers = append(closers, closePace)
			wc := bulkhead.WorkersConfig{
				Classes: []bulkhead.WorkerClass{
					{Name: "interactive", Reserved: interactiveRsv, MaxQueue: interactiveQueue},
					{Name: "background", MaxQueue: backgroundQueue},
				},
				Pace: pace,
			}
			if b.Shared {
				wc.Gate = b.Gate(pod, "export-workers", exportCap) // the cap for the fleet
			}
			pools[ci] = append(pools[ci], bulkhead.NewWorkers(exportCap, wc))
		}
	}
	p.watch(cols)
	tick := time.NewTicker(time.Second / (bgRate + 1))
	end := time.Now().Add(cfg.Duration)
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		pod := i % cfg.Pods
		class := "background"
		if i%(iaEvery+1) == iaEvery {
			class = "interactive"
		}
		for ci, col := range cols {
			t0 := time.Now()
			err := pools[ci][pod].Submit(ctx, class, bulkhead.Job{Run: func(ctx context.Context) error {
				col.started(pod, time.Since(t0))
				col.peak.enter()
				examplekit.Sleep(ctx, exportJobDuration)
				col.peak.leave()
				return nil
			}})
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
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ws := range pools {
		for _, w := range ws {
			if err := w.Shutdown(sctx); err != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("shutdown: %w", err)
			}
		}
	}
	var t table
	t.note = fmt.Sprintf("%d/s starts, %d at once (%d reserved for interactive), %v jobs; %d/s background and 1/s interactive submitted",
		exportRate, exportCap, interactiveRsv, exportJobDuration, bgRate)
	t.standard(cols, exportCap)
	t.addCols("start rate", cols, func(c *column) string { return fmt.Sprintf("%.1f/s (limit %d/s)", c.startRate(), exportRate) })
	for _, class := range []string{"interactive", "background"} {
		t.addEach(class+" started, longest wait", cols, func(i int, _ *column) string {
			var n uint64
			var longest time.Duration
			for _, w := range pools[i] {
				st, _ := w.Stats().Class(class)
				n += st.Started
				longest = max(longest, st.MaxQueueDelay)
			}
			return fmt.Sprintf("%d, %s", n, ms(longest))
		})
	}
	return &t, nil
}

// A tenant of job 3, with the demo API key its clients send.
type tenant struct{ name, tier, key string }

var tenants = []tenant{{"acme", "free", "key-acme"}, {"globex", "gold", "key-globex"}} // as in examples/reportexport

// httpJob is job 3, guarding an expensive HTTP handler: 3 clients per tenant
// each POST /reports/export-pdf every 50ms to a bulkhead in front of a 300ms
// handler (a real in-process HTTP server per pod), through layers: a global
// cap (200 at once, 503), the tenant's tier (free 100/min, gold 1000/min) and
// the export route (5/min, 2 at once per tenant, never queued).
func httpJob(ctx context.Context, cfg Config, bs []*Backend, p *progress) (*table, error) {
	const perTenant, clientsPerTenant, every, work = pdfRunning, 3, 50 * time.Millisecond, 300 * time.Millisecond
	exportLimit := shaper.Limit{Rate: shaper.PerMinute(pdfPerMin), Burst: pdfPerMin}
	type result struct {
		col      *column
		heads    []*bulkhead.Bulkhead
		perTen   map[string]*gauge
		admitted map[string]*atomic.Int64
		servers  []*httptest.Server
	}
	var sampleMu sync.Mutex
	var sample *string // the 429 to show, with the longest Retry-After
	var sampleRA int
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
		r := &result{col: newColumn(b.Name, cfg.Pods), perTen: map[string]*gauge{}, admitted: map[string]*atomic.Int64{}}
		res[ci] = r
		for _, tn := range tenants {
			r.perTen[tn.name], r.admitted[tn.name] = new(gauge), new(atomic.Int64)
		}
		for pod := range cfg.Pods {
			bh := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
				{Name: "global", Gate: b.Gate(pod, "global", globalCap), MaxWait: globalMaxWait},
				{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{
					"free": b.Rate(pod, "tier-free", shaper.Limit{Rate: shaper.PerMinute(freePerMin), Burst: freePerMin}),
					"gold": b.Rate(pod, "tier-gold", shaper.Limit{Rate: shaper.PerMinute(goldPerMin), Burst: goldPerMin}),
				}},
				{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant, MaxWait: pdfMaxWait, // never queue
					Rate: b.Rate(pod, "export", exportLimit), KeyedGate: b.Keyed(pod, "export-running", perTenant)},
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
						if resp.StatusCode == http.StatusTooManyRequests {
							// Keep the 429 with the longest Retry-After: the
							// export rate's (12s at 5/min), as in the README.
							ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
							s := fmt.Sprintf("%s %s\nRetry-After: %d\nContent-Type: %s\n\n%s",
								resp.Proto, resp.Status, ra, resp.Header.Get("Content-Type"), strings.TrimSpace(string(body)))
							sampleMu.Lock()
							if ra > sampleRA {
								sample, sampleRA = &s, ra
							}
							sampleMu.Unlock()
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
	t.note = fmt.Sprintf("export %d/min and %d at once per tenant, never queued; tiers free %d/min, gold %d/min; global %d at once (%d tenants × %d at once reach at most %d of it)",
		pdfPerMin, pdfRunning, freePerMin, goldPerMin, globalCap, len(tenants), pdfRunning, pdfRunning*len(tenants))
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
				by[l.Name] += l.Limited + l.NoCapacity + l.MaxWait + l.Unavailable + l.Errors
			}
		}
		return fmt.Sprintf("global %d, tier %d, export %d", by["global"], by["tier"], by["export"])
	})
	if s := sample; s != nil {
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
