package bulkhead_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
)

// The downstream of the end-to-end shedding test: a handler with renderers
// renderers that each take work per request, so its capacity is
// renderers/work requests a second (80/s); a request's render takes from
// work/2 to 3×work/2 (the client picks it: mean work), so that the renderers
// do not end in step. A long render keeps the machine's
// scheduling noise (tens of milliseconds on two shared cores) small beside
// it, and the load light (240 requests a second at 3×).
const (
	renderers = 8
	work      = 100 * time.Millisecond
)

// shedClasses are the four classes of the end-to-end test, most critical
// first: critical (one slot reserved, waits up to the layer's MaxWait),
// default (waits three renders), batch (half a render) and sheddable (never
// waits).
var shedClasses = []bulkhead.Criticality{
	{Name: "critical", Reserved: 1},
	{Name: "default", MaxWait: 3 * work},
	{Name: "batch", MaxWait: work / 2},
	{Name: "sheddable", MaxWait: -1},
}

// shedIDs are the verified identities of the end-to-end test's bearer
// tokens: each carries its class.
var shedIDs = map[string]bulkhead.Identity{
	"crit":  {Tenant: "ops", Criticality: "critical"},
	"def":   {Tenant: "web", Criticality: "default"},
	"batch": {Tenant: "etl", Criticality: "batch"},
	"shed":  {Tenant: "crawler", Criticality: "sheddable"},
}

// renderServer is a real HTTP server on loopback TCP: the auth middleware
// (bulkhead.WithIdentity from the bearer token), then b, then the renderer
// handler, which counts the requests inside it (in, with the most at once
// in peak) and serves each in the time its query's work names (else work),
// holding one of renderers slots.
type renderServer struct {
	srv      *httptest.Server
	client   *http.Client
	in, peak atomic.Int64

	mu      sync.Mutex
	renders []span // guarded by mu
}

// A span is one render: from start, for d.
type span struct {
	start time.Time
	d     time.Duration
}

// busy returns the render time of the renders within [from, to), as a
// fraction of the renderers' time then.
func (rs *renderServer) busy(from, to time.Time) float64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var sum time.Duration
	for _, r := range rs.renders {
		if b, e := later(r.start, from), earlier(r.start.Add(r.d), to); e.After(b) {
			sum += e.Sub(b)
		}
	}
	return sum.Seconds() / (renderers * to.Sub(from).Seconds())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func newRenderServer(t *testing.T, b *bulkhead.Bulkhead) *renderServer {
	t.Helper()
	rs := &renderServer{}
	slots := make(chan struct{}, renderers)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rs.in.Add(1)
		defer rs.in.Add(-1)
		for m := rs.peak.Load(); n > m && !rs.peak.CompareAndSwap(m, n); m = rs.peak.Load() {
		}
		d, err := time.ParseDuration(r.URL.Query().Get("work"))
		if err != nil {
			d = work
		}
		slots <- struct{}{}
		rs.mu.Lock()
		rs.renders = append(rs.renders, span{time.Now(), d})
		rs.mu.Unlock()
		time.Sleep(d) // the render
		<-slots
		io.WriteString(w, "rendered\n")
	})
	rs.srv = httptest.NewServer(auth(shedIDs, b.Handler(h)))
	rs.srv.Config.ErrorLog = discardLogger()
	t.Cleanup(rs.srv.Close)
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	rs.client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	return rs
}

// outcome is what one request of the end-to-end test saw.
type outcome struct {
	class   string
	word    string // a refusal's error code (its reason)
	status  int
	latency time.Duration
	done    time.Time
	err     error // a transport error, or a malformed refusal
}

// get sends GET path as token, with the headers hdr (name, value, ...), and
// checks a refusal's form: a Retry-After of whole seconds ≥ 1 and the JSON
// body whose retry_after_seconds matches it.
func (rs *renderServer) get(ctx context.Context, path, token string, hdr ...string) outcome {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rs.srv.URL+path, nil)
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := rs.client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	o := outcome{status: resp.StatusCode, latency: time.Since(start), done: time.Now(), err: err}
	if err != nil || resp.StatusCode == http.StatusOK {
		return o
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		o.err = fmt.Errorf("status %d: Retry-After %q, want whole seconds ≥ 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		return o
	}
	var body struct {
		Error             string `json:"error"`
		Message           string `json:"message"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		o.err = fmt.Errorf("status %d: body %q (%s): %v", resp.StatusCode, raw, resp.Header.Get("Content-Type"), err)
		return o
	}
	if body.RetryAfterSeconds != ra || body.Message == "" {
		o.err = fmt.Errorf("status %d: body %+v, Retry-After %d", resp.StatusCode, body, ra)
		return o
	}
	o.word = body.Error
	return o
}

// p99 returns the 99th percentile of ds (nearest rank).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (99*len(s) + 99) / 100
	return s[min(i, len(s))-1]
}

// TestShedHTTPOverload is the end-to-end test over real HTTP: a
// renderer handler with a fixed capacity (8 renderers at 100ms: 80/s)
// behind a bulkhead whose one layer is a fixed semaphore of 8 with four
// criticality classes, picked by the verified identity (an auth middleware
// calling WithIdentity) or by the route (/health is critical whoever
// calls). It measures the no-load p99 first, then offers 3× the capacity
// open loop (240/s for 5s), mixed 10/30/30/30 critical/default/batch/
// sheddable, and checks the targets with bounds wide enough for real
// time on two shared cores: critical ≥ 99.9% success (with fewer than 1000
// critical requests: every one) and p99 ≤ 2× the no-load p99; goodput ≥ 95%
// of capacity; every refusal a 503 shed with Retry-After ≥ 1 and the JSON
// body; never more requests in the handler than the gate's limit.
func TestShedHTTPOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: seconds of load")
	}
	gate := semaphore.New(renderers, semaphore.Config{})
	b := bulkhead.New(bulkhead.Config{
		Layers: []bulkhead.Layer{{Name: "render", Gate: gate, MaxWait: 2 * time.Second, Classes: shedClasses}},
		Criticality: func(id bulkhead.Identity, r bulkhead.Request) string {
			if r.Path == "/health" {
				return "critical"
			}
			return id.Criticality
		},
	})
	rs := newRenderServer(t, b)
	ctx := t.Context()

	// A request's render time, uniform in [work/2, 3×work/2).
	rng := rand.New(rand.NewPCG(22, 1))
	var rmu sync.Mutex
	renderPath := func(path string) string {
		rmu.Lock()
		defer rmu.Unlock()
		return path + "?work=" + (work/2 + time.Duration(rng.Int64N(int64(work)))).String()
	}

	// No load: half the capacity's concurrency, closed loop.
	var idle []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range renderers / 2 {
		wg.Go(func() {
			for range 25 {
				o := rs.get(ctx, renderPath("/render"), "crit")
				if o.err != nil || o.status != http.StatusOK {
					t.Errorf("no load: %d %v", o.status, o.err)
					return
				}
				mu.Lock()
				idle = append(idle, o.latency)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	idleP99 := p99(idle)

	// 3× overload, open loop: arrivals every 1/240 s whatever the replies.
	const (
		offered = 3 * renderers * int(time.Second/work) // a second
		d       = 5 * time.Second
		warm    = 500 * time.Millisecond // left out of the goodput window
	)
	total := offered * int(d/time.Second)
	interval := time.Second / time.Duration(offered)
	out := make([]outcome, total)
	start := time.Now()
	for i := range total {
		var class, path, token string
		switch p := rng.IntN(100); {
		case p < 10:
			class, path, token = "critical", "/render", "crit"
			if i%2 == 0 {
				class, path, token = "critical", "/health", "shed" // by route
			}
		case p < 40:
			class, path, token = "default", "/render", "def"
		case p < 70:
			class, path, token = "batch", "/render", "batch"
		default:
			class, path, token = "sheddable", "/render", "shed"
		}
		path = renderPath(path)
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval))) // pacing the arrivals
		wg.Go(func() {
			o := rs.get(ctx, path, token)
			o.class, o.err = class, o.errOr(class)
			out[i] = o
		})
	}
	wg.Wait()
	end := start.Add(d)

	type tally struct {
		sent, ok, shed int
		lat            []time.Duration
	}
	by := map[string]*tally{}
	served := 0
	for _, o := range out {
		c := by[o.class]
		if c == nil {
			c = &tally{}
			by[o.class] = c
		}
		c.sent++
		switch {
		case o.err != nil:
			t.Errorf("%s: %v", o.class, o.err)
		case o.status == http.StatusOK:
			c.ok++
			c.lat = append(c.lat, o.latency)
			if o.done.After(start.Add(warm)) && !o.done.After(end) {
				served++
			}
		case o.status == http.StatusServiceUnavailable:
			c.shed++
		default:
			t.Errorf("%s: status %d", o.class, o.status)
		}
	}
	// Goodput as a fraction of capacity: the renderers' time spent on the
	// renders of served requests (their requested render time: the
	// handler's own oversleep is no work) within the window. (Served
	// requests a second against renderers/work is the same in the mean, but
	// the renders' random lengths and the window's edges make it noisier.)
	capacity := float64(renderers) / work.Seconds()
	goodput := rs.busy(start.Add(warm), end)
	crit := by["critical"]
	critP99 := p99(crit.lat)
	t.Logf("no load: p99 %v over %d; overload %d/s for %v, capacity %.0f/s: %.1f/s served, goodput %.1f%% of capacity, handler peak %d",
		idleP99, len(idle), offered, d, capacity, float64(served)/(d-warm).Seconds(), 100*goodput, rs.peak.Load())
	for _, name := range []string{"critical", "default", "batch", "sheddable"} {
		c := by[name]
		t.Logf("%-9s sent %4d ok %4d (%.2f%%) shed %4d p99 %v", name, c.sent, c.ok, 100*float64(c.ok)/float64(c.sent), c.shed, p99(c.lat))
	}
	st := b.Stats().Layers[0]
	t.Logf("layer: %+v", st)

	if rate := float64(crit.ok) / float64(crit.sent); rate < 0.999 {
		t.Errorf("critical success %.4f (%d of %d), want ≥ 0.999", rate, crit.ok, crit.sent)
	}
	if critP99 > 2*idleP99 {
		t.Errorf("critical p99 %v under 3× load, want ≤ 2× the no-load p99 %v", critP99, idleP99)
	}
	if goodput < 0.95 {
		t.Errorf("goodput %.1f%% of capacity, want ≥ 95%%", 100*goodput)
	}
	if p := rs.peak.Load(); p > renderers {
		t.Errorf("%d requests in the handler at once, the gate's limit is %d", p, renderers)
	}
	if by["sheddable"].shed == 0 || st.Shed == 0 || st.Classes[3].Shed == 0 {
		t.Errorf("nothing shed at 3× capacity: %+v", st)
	}
	if st.Classes[0].Shed != 0 || st.MaxWait != 0 || st.NoCapacity != 0 {
		t.Errorf("critical refused: %+v", st)
	}
	if st.InFlight != 0 || gate.Stats().InUse != 0 {
		t.Errorf("after the load: layer %d in flight, gate %+v", st.InFlight, gate.Stats())
	}
}

// errOr returns o's error, or one when its status is a refusal whose word
// is not the one a request of class may get: a class after the first is
// shed; the first class keeps the usual words.
func (o outcome) errOr(class string) error {
	if o.err != nil || o.status == http.StatusOK {
		return o.err
	}
	word := o.word
	if class != "critical" && word != "shed" || class == "critical" && word == "shed" {
		return fmt.Errorf("status %d, error %q for a %s request", o.status, word, class)
	}
	if o.status != http.StatusServiceUnavailable {
		return fmt.Errorf("status %d (%s) for a %s request, want 503", o.status, word, class)
	}
	return nil
}

// TestShedHTTPCriticalityHeader: a header naming a class changes nothing
// unless Config.CriticalityHeader names it; then it takes precedence over
// the identity's class. Over real HTTP, with the gate held full by
// sheddable requests but for the critical reservation.
func TestShedHTTPCriticalityHeader(t *testing.T) {
	for _, tc := range []struct {
		header string // Config.CriticalityHeader
		want   int    // the status of a sheddable caller claiming critical
	}{
		{"", http.StatusServiceUnavailable},
		{"X-Criticality", http.StatusOK},
	} {
		t.Run(fmt.Sprintf("header=%q", tc.header), func(t *testing.T) {
			gate := semaphore.New(2, semaphore.Config{})
			b := bulkhead.New(bulkhead.Config{
				Layers:            []bulkhead.Layer{{Name: "render", Gate: gate, Classes: shedClasses}},
				CriticalityHeader: tc.header,
			})
			release := make(chan struct{})
			entered := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					entered <- struct{}{}
					<-release
				}
			})
			srv := httptest.NewServer(auth(shedIDs, b.Handler(h)))
			srv.Config.ErrorLog = discardLogger()
			defer srv.Close()
			c := srv.Client()
			c.Timeout = 10 * time.Second

			// One sheddable holder fills what is not reserved.
			held := make(chan reply, 1)
			go func() {
				rp, _ := call(t, context.Background(), c, srv.URL, "GET", "/hold", "shed")
				held <- rp
			}()
			<-entered
			defer func() { close(release); <-held }() // before srv.Close

			send := func(token string, hdr ...string) (int, string) {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/x", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(raw)
			}
			// Plain sheddable: shed (the last slot is critical's).
			if st, body := send("shed"); st != http.StatusServiceUnavailable || !strings.Contains(body, `"shed"`) {
				t.Fatalf("sheddable without a header: %d %s", st, body)
			}
			// Claiming critical by header.
			if st, body := send("shed", "X-Criticality", "critical"); st != tc.want {
				t.Errorf("sheddable claiming critical: %d %s, want %d", st, body, tc.want)
			}
			// An unknown class by header is the least critical.
			if st, _ := send("crit", "X-Criticality", "nonesuch"); tc.header != "" && st != http.StatusServiceUnavailable ||
				tc.header == "" && st != http.StatusOK {
				t.Errorf("critical identity, header nonesuch: %d", st)
			}
			st := b.Stats().Layers[0]
			// Either way one request ran as critical and two were shed.
			if st.Classes[0].Admitted != 1 || st.Classes[3].Admitted != 1 || st.Classes[3].Shed != 2 {
				t.Errorf("class stats %+v", st.Classes)
			}
		})
	}
}
