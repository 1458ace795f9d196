package otelfloodgate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/otelfloodgate"
)

// TestDistsemAndBreaker drives a distsem.Semaphore and its breaker through
// admit, reject, hold, degrade (the redis-server child stopped with SIGSTOP:
// a held lease is lost, calls time out, the breaker opens and FailOpen
// admits) and recover, and checks every exported point.
func TestDistsemAndBreaker(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	m, r := newMetrics(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	br := breaker.New("redis", m.BreakerConfig("redis", breaker.Config{
		CallTimeout: 100 * time.Millisecond, OpenDuration: 300 * time.Millisecond, Logger: logger,
	}))
	sem := distsem.New(rdb, redistest.Prefix(t)+"sem", 2, m.DistsemConfig("sem", distsem.Config{
		Breaker: br, Policy: breaker.FailOpen, Lease: 600 * time.Millisecond, Logger: logger,
	}))
	defer sem.Close()
	if _, err := m.Breaker(br); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Distsem("sem", sem); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	held, err := sem.Acquire(ctx, 1) // held through the outage: its lease is lost
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx, 2); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("TryAcquire(2) = %v, want ErrNoCapacity", err)
	}
	if _, err := sem.Acquire(ctx, 3); !errors.Is(err, distsem.ErrTooLarge) {
		t.Fatalf("Acquire(3) = %v, want ErrTooLarge", err)
	}

	// Degrade: stop Redis until the breaker opens and the held lease is lost.
	srv.Pause()
	degraded := 0
	deadline := time.Now().Add(10 * time.Second)
	for br.State() != breaker.StateOpen || !isClosed(held.Lost()) {
		if time.Now().After(deadline) {
			srv.Resume()
			t.Fatalf("breaker %v, lease lost %v after 10s of a stopped Redis", br.State(), isClosed(held.Lost()))
		}
		q, err := sem.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("TryAcquire under FailOpen = %v", err)
		}
		if !q.Degraded() {
			t.Fatalf("TryAcquire while Redis is stopped: a permit held in Redis")
		}
		degraded++
		q.Release(ctx)
		time.Sleep(20 * time.Millisecond) // pacing only: the loop polls the breaker
	}
	st := br.Stats()
	srv.Resume()

	// Recover: once the open period ends, a probe closes the breaker.
	deadline = time.Now().Add(10 * time.Second)
	for {
		q, err := sem.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("TryAcquire after Resume = %v", err)
		}
		if !q.Degraded() {
			q.Release(ctx)
			break
		}
		degraded++
		q.Release(ctx)
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Resume")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := br.State(); s != breaker.StateClosed {
		t.Fatalf("breaker %v after a store answer, want closed", s)
	}
	st = br.Stats()
	ls := sem.LocalStats()
	got := points(t, r)

	d := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "sem", kind, "distsem"}, kv...)...)
	}
	b := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "redis", kind, "breaker"}, kv...)...)
	}
	acquired := int64(2 + degraded + 1)
	want := map[string]int64{
		d(otelfloodgate.NameAdmitted):                                                     acquired,
		d(otelfloodgate.NameCanceled):                                                     0,
		d(otelfloodgate.NameRejected, rsn, "no_capacity"):                                 1,
		d(otelfloodgate.NameRejected, rsn, "too_large"):                                   1,
		d(otelfloodgate.NameRejected, rsn, "store_unavailable"):                           0,
		d(otelfloodgate.NameRejected, rsn, "closed"):                                      0,
		d(otelfloodgate.NameRejected, rsn, "local_busy"):                                  0,
		d(otelfloodgate.NameDecisions, "floodgate.source", "store"):                       acquired - int64(degraded),
		d(otelfloodgate.NameDecisions, "floodgate.source", "fail_open"):                   int64(degraded),
		d(otelfloodgate.NameDecisions, "floodgate.source", "local"):                       0,
		d(otelfloodgate.NameRejected, rsn, "error"):                                       0,
		d(otelfloodgate.NameInUse):                                                        0, // the held permit was lost
		d(otelfloodgate.NameLeaseLost):                                                    1,
		d(otelfloodgate.NameLeaseRenewals, "floodgate.outcome", "ok"):                     ls.Renewals,
		d(otelfloodgate.NameLeaseRenewals, "floodgate.outcome", "failure"):                ls.RenewalErrors,
		d(otelfloodgate.NameWaitDuration) + "#count":                                      acquired,
		d(otelfloodgate.NameHoldDuration) + "#count":                                      acquired - 1,
		b(otelfloodgate.NameDecisions, "floodgate.source", "store"):                       int64(st.StoreAnswers),
		b(otelfloodgate.NameDecisions, "floodgate.source", "fail_open"):                   int64(st.Degraded), // distsem resolves its policy itself
		b(otelfloodgate.NameDecisions, "floodgate.source", "local"):                       0,
		b(otelfloodgate.NameDecisions, "floodgate.source", "fail_closed"):                 int64(st.Rejections),
		b(otelfloodgate.NameBreakerState, "floodgate.state", "closed"):                    1,
		b(otelfloodgate.NameBreakerState, "floodgate.state", "half_open"):                 0,
		b(otelfloodgate.NameBreakerState, "floodgate.state", "open"):                      0,
		b(otelfloodgate.NameBreakerTransitions):                                           int64(st.Transitions),
		b(otelfloodgate.NameStoreErrors):                                                  int64(st.StoreFailures),
		b(otelfloodgate.NameStoreCallDuration, "floodgate.outcome", "failure") + "#count": int64(st.StoreFailures),
		b(otelfloodgate.NameStoreCallDuration, "floodgate.outcome", "ok") + "#count":      got[b(otelfloodgate.NameStoreCallDuration, "floodgate.outcome", "ok")+"#count"],
	}
	diff(t, got, want)
	// Sanity of what the exact comparison took from Stats.
	if st.StoreFailures == 0 || st.Transitions < 3 || st.StoreAnswers < 5 || ls.RenewalErrors == 0 {
		t.Errorf("breaker %+v, distsem %+v: want failures, open→half-open→closed, answers, failed renewals", st, ls)
	}
	if n := got[b(otelfloodgate.NameStoreCallDuration, "floodgate.outcome", "ok")+"#count"]; n < int64(st.StoreAnswers) {
		t.Errorf("store call durations ok = %d, want at least the %d answers", n, st.StoreAnswers)
	}
	// Logs: one WARN per lost lease and per opening, INFO otherwise, all with
	// limiter=.
	out := logs.String()
	for _, w := range []string{
		`level=WARN msg="distsem: lease lost" limiter=`,
		`level=WARN msg="breaker: open" limiter=redis kind=breaker`,
		`level=INFO msg="breaker: half-open" limiter=redis kind=breaker`,
		`level=INFO msg="breaker: closed" limiter=redis kind=breaker`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "lease lost"); n != 1 {
		t.Errorf("%d lease-lost records, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "\n"); n != int(st.Transitions)+1 {
		t.Errorf("%d log records, want %d (transitions + the lost lease):\n%s", n, st.Transitions+1, out)
	}
	_ = context.Background
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
