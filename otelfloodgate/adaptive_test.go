package otelfloodgate_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
)

// backend is a downstream of `workers` workers, FIFO beyond: a call holds a
// worker for its service time.
type backend struct{ workers chan struct{} }

func newBackend(workers int) *backend { return &backend{workers: make(chan struct{}, workers)} }

func (b *backend) serve(ctx context.Context, d time.Duration) {
	select {
	case b.workers <- struct{}{}:
	case <-ctx.Done():
		return
	}
	time.Sleep(d)
	<-b.workers
}

// TestAdaptiveEndToEnd puts m.Observer into a real adaptive.Gate in front of
// a backend of 4 workers, drives it with more callers than that until its
// limit has moved, and checks that the limit and latency baseline gauges
// show what the gate's last change of limit reported (and the gate's Limit),
// and that in_use follows the holds back to 0.
func TestAdaptiveEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		obs := m.Observer("replica")
		var mu sync.Mutex
		var last floodgate.Event // the last KindLimit the gate reported
		changes := 0
		g := adaptive.New(adaptive.Config{Max: 64, MinRound: 20 * time.Millisecond, MinSamples: 20,
			Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
				obs.Observe(e)
				if e.Kind == floodgate.KindLimit {
					mu.Lock()
					last, changes = e, changes+1
					mu.Unlock()
				}
			})})
		be := newBackend(4)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					h, err := g.Hold(ctx, 1)
					if err != nil { // refused (the wait would outlast ctx) or ctx done
						time.Sleep(time.Millisecond)
						continue
					}
					be.serve(ctx, time.Duration(4+(i+n)%3)*time.Millisecond) // 4 to 6 ms
					h.Release()
				}
			})
		}
		wg.Wait()
		st := g.Stats()
		mu.Lock()
		defer mu.Unlock()
		if changes == 0 || last.Duration <= 0 {
			t.Fatalf("the gate reported %d changes of limit (last %+v); Stats %+v", changes, last, st)
		}
		if last.N != st.Limit {
			t.Errorf("last KindLimit N = %d, the gate's Limit %d", last.N, st.Limit)
		}
		got := points(t, r)
		for k, v := range map[string]int64{
			"floodgate.limit{component=adaptive}":               last.N,
			"floodgate.latency.baseline{component=adaptive}#us": int64(last.Duration.Seconds()*1e6 + 0.5), // as points rounds it
			"floodgate.in_use{component=adaptive}":              0,
		} {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %d (present: %v), want %d", k, g, ok, v)
			}
		}
		if a := got["floodgate.admitted{component=adaptive}"]; a < int64(st.Samples) {
			t.Errorf("floodgate.admitted = %d, fewer than the %d holds the gate measured", a, st.Samples)
		}
		t.Logf("%d changes of limit, last to %d (baseline %v); Stats %+v", changes, last.N, last.Duration, st)
		if t.Failed() {
			t.Logf("points: %v", got)
		}
	})
}
