package otelfloodgate_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

func TestBulkhead(t *testing.T) {
	m, r := newMetrics(t)
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "export-rate", Route: "POST /export", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2)})},
	}})
	if _, err := m.Bulkhead("api", b); err != nil {
		t.Fatal(err)
	}
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme"})
	req := bulkhead.Request{Method: "POST", Path: "/export"}
	for i := range 3 {
		err := b.Do(ctx, req, func(context.Context) error { return nil })
		if (i < 2) != (err == nil) {
			t.Fatalf("Do #%d = %v", i, err)
		}
	}
	if err := b.Do(context.Background(), req, func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrNoIdentity) {
		t.Fatalf("Do without identity = %v, want ErrNoIdentity", err)
	}
	l := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "api", kind, "bulkhead", "floodgate.layer", "export-rate"}, kv...)...)
	}
	g := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "api", kind, "bulkhead"}, kv...)...)
	}
	diff(t, points(t, r), map[string]int64{
		l(otelfloodgate.NameAdmitted):                           2,
		l(otelfloodgate.NameCanceled):                           0,
		l(otelfloodgate.NameRejected, rsn, "rate"):              1,
		l(otelfloodgate.NameRejected, rsn, "concurrency"):       0,
		l(otelfloodgate.NameRejected, rsn, "store_unavailable"): 0,
		l(otelfloodgate.NameRejected, rsn, "error"):             0,
		l(otelfloodgate.NameInUse):                              0,
		l(otelfloodgate.NameWaiting):                            0,
		g(otelfloodgate.NameRejected, rsn, "no_identity"):       1,
		g(otelfloodgate.NameRejected, rsn, "invalid_key"):       0,
		g(otelfloodgate.NameRejected, rsn, "no_policy"):         0,
	})
}

// TestBulkheadWait: BulkheadConfig records floodgate.wait.duration per layer
// for the requests granted a gate after waiting, and only for those.
func TestBulkheadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		g := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
		b := bulkhead.New(m.BulkheadConfig("api", bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "global", Gate: g, MaxWait: 2 * time.Second},
		}}))
		if _, err := m.Bulkhead("api", b); err != nil {
			t.Fatal(err)
		}
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme"})
		ok := func(context.Context) error { return nil }
		if err := b.Do(ctx, bulkhead.Request{}, ok); err != nil { // at once: no wait
			t.Fatal(err)
		}
		hold := make(chan struct{})
		go b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-hold; return nil })
		synctest.Wait()
		if err := b.Do(ctx, bulkhead.Request{}, ok); !errors.Is(err, bulkhead.ErrMaxWait) { // waits, refused
			t.Fatalf("Do on a full gate = %v, want ErrMaxWait", err)
		}
		done := make(chan error)
		go func() { done <- b.Do(ctx, bulkhead.Request{}, ok) }()
		time.Sleep(time.Second)
		close(hold)
		if err := <-done; err != nil { // waits 1s, granted
			t.Fatal(err)
		}
		l := func(name string, kv ...string) string {
			return key(name, append([]string{lim, "api", kind, "bulkhead", "floodgate.layer", "global"}, kv...)...)
		}
		g0 := func(name string, kv ...string) string {
			return key(name, append([]string{lim, "api", kind, "bulkhead"}, kv...)...)
		}
		diff(t, points(t, r), map[string]int64{
			l(otelfloodgate.NameAdmitted):                           3,
			l(otelfloodgate.NameCanceled):                           0,
			l(otelfloodgate.NameRejected, rsn, "rate"):              0,
			l(otelfloodgate.NameRejected, rsn, "concurrency"):       1,
			l(otelfloodgate.NameRejected, rsn, "store_unavailable"): 0,
			l(otelfloodgate.NameRejected, rsn, "error"):             0,
			l(otelfloodgate.NameInUse):                              0,
			l(otelfloodgate.NameWaiting):                            0,
			l(otelfloodgate.NameWaitDuration) + "#count":            1,
			g0(otelfloodgate.NameRejected, rsn, "no_identity"):      0,
			g0(otelfloodgate.NameRejected, rsn, "invalid_key"):      0,
			g0(otelfloodgate.NameRejected, rsn, "no_policy"):        0,
		})
	})
}

// TestWorkers: per class admitted, queued, running, refusals and the queue
// delay histogram of a Workers.
func TestWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		w := bulkhead.NewWorkers(1, m.WorkersConfig("jobs", bulkhead.WorkersConfig{
			Classes: []bulkhead.Class{{Name: "fg"}, {Name: "bg", MaxQueue: 1}},
		}))
		if _, err := m.Workers("jobs", w); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		block := make(chan struct{})
		if err := w.Submit(ctx, "fg", bulkhead.Job{Run: func(context.Context) error { <-block; return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := w.Submit(ctx, "bg", bulkhead.Job{Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := w.Submit(ctx, "bg", bulkhead.Job{Run: func(context.Context) error { return nil }}); !errors.Is(err, bulkhead.ErrQueueFull) {
			t.Fatalf("Submit on a full backlog = %v, want ErrQueueFull", err)
		}
		synctest.Wait()
		c := func(class, name string, kv ...string) string {
			return key(name, append([]string{lim, "jobs", kind, "workers", "floodgate.class", class}, kv...)...)
		}
		want := map[string]int64{key(otelfloodgate.NameLimit, lim, "jobs", kind, "workers"): 1}
		set := func(class string, admitted, queued, running, queueFull, closed, delays int64) {
			want[c(class, otelfloodgate.NameAdmitted)] = admitted
			want[c(class, otelfloodgate.NameWaiting)] = queued
			want[c(class, otelfloodgate.NameInUse)] = running
			want[c(class, otelfloodgate.NameCanceled)] = 0
			want[c(class, otelfloodgate.NameRejected, rsn, "queue_full")] = queueFull
			want[c(class, otelfloodgate.NameRejected, rsn, "closed")] = closed
			want[c(class, otelfloodgate.NameRejected, rsn, "handed_back")] = 0
			want[c(class, otelfloodgate.NameRejected, rsn, "pace")] = 0
			want[c(class, otelfloodgate.NameRejected, rsn, "gate")] = 0
			if delays > 0 {
				want[c(class, otelfloodgate.NameQueueDelay)+"#count"] = delays
			}
		}
		set("fg", 1, 0, 1, 0, 0, 1)
		set("bg", 0, 1, 0, 1, 0, 0)
		diff(t, points(t, r), want)

		time.Sleep(time.Second)
		close(block)
		if err := w.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Submit(ctx, "fg", bulkhead.Job{Run: func(context.Context) error { return nil }}); !errors.Is(err, bulkhead.ErrClosed) {
			t.Fatalf("Submit after Shutdown = %v, want ErrClosed", err)
		}
		set("fg", 1, 0, 0, 0, 1, 1)
		set("bg", 1, 0, 0, 1, 0, 1)
		diff(t, points(t, r), want)
	})
}
