package bulkhead_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead"
)

// TestAdaptiveLayerFindsTheHandlersCapacity guards a real HTTP handler that
// can render 4 reports at once (more wait for a renderer) with a bulkhead
// layer whose gate is adaptive, and sends it 24 callers over real
// connections: the gate's limit settles near 4, so the handler holds about 4
// requests rather than 24, and the others wait in the gate, where MaxWait and
// Retry-After apply. Real time and a loaded machine: the bounds are wide, and
// a run without the gate (24 in the handler) is far outside them.
func TestAdaptiveLayerFindsTheHandlersCapacity(t *testing.T) {
	const renderers, callers = 4, 24
	gate := adaptive.New(adaptive.Config{Max: 64, MinSamples: 50, MinRound: 20 * time.Millisecond})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "export", Gate: gate}}})
	slots := make(chan struct{}, renderers)
	var inHandler, served atomic.Int64
	ids := map[string]bulkhead.Identity{"t": {Tenant: "acme"}}
	srv := httptest.NewServer(auth(ids, b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler.Add(1)
		defer inHandler.Add(-1)
		slots <- struct{}{}
		time.Sleep(4 * time.Millisecond) // one report
		<-slots
		served.Add(1)
	}))))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
				req.Header.Set("Authorization", "Bearer t")
				if resp, err := client.Do(req); err == nil {
					if resp.StatusCode != http.StatusOK {
						t.Errorf("status %d", resp.StatusCode)
						cancel()
					}
					resp.Body.Close()
				}
			}
		})
	}
	var limits, held []int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	settle := time.Now().Add(2500 * time.Millisecond)
	var servedAtSettle int64 = -1
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			if time.Now().After(settle) {
				if servedAtSettle < 0 {
					servedAtSettle = served.Load()
				}
				limits, held = append(limits, gate.Limit()), append(held, inHandler.Load())
			}
		case <-ctx.Done():
		}
	}
	rate := float64(served.Load()-servedAtSettle) / time.Since(settle).Seconds()
	wg.Wait()
	slices.Sort(limits)
	slices.Sort(held)
	if len(limits) < 20 {
		t.Fatalf("only %d samples", len(limits))
	}
	ml, mh := limits[len(limits)/2], held[len(held)/2]
	st := gate.Stats()
	t.Logf("median limit %d, median requests in the handler %d (of %d callers, %d renderers), %.0f served/s of a capacity of 1000/s; baseline %v, %d rounds", ml, mh, callers, renderers, rate, st.Baseline, st.Rounds)
	if ml > 10 || mh > 10 {
		t.Errorf("median limit %d and %d requests in the handler, want both near the %d renderers", ml, mh, renderers)
	}
	// The limit did not collapse either: the renderers stayed busy. (The
	// bound allows for a loaded machine, whose HTTP stack is slower.)
	if rate < 300 {
		t.Errorf("%.0f reports served a second, want most of the 1000/s the renderers can do", rate)
	}
}
