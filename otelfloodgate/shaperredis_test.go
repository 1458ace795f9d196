package otelfloodgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestRedisMeterAndQueue drives two Redis meters (FailOpen and FailClosed)
// and a Redis queue (FailClosed) sharing one breaker through admit, reject
// (every reason a caller can cause), degrade (the redis-server child stopped
// with SIGSTOP until the breaker opens) and recover, and checks every
// exported point.
func TestRedisMeterAndQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	m, r := newMetrics(t)
	br := breaker.New("redis", breaker.Config{CallTimeout: 100 * time.Millisecond, OpenDuration: 300 * time.Millisecond})
	prefix := redistest.Prefix(t)
	limit := shaper.Limit{Rate: shaper.PerMinute(2)}
	open := shaperredis.NewMeter(rdb, limit, shaperredis.Config{Prefix: prefix + "o:", Breaker: br, Policy: breaker.FailOpen, MaxKeyLen: 8})
	closed := shaperredis.NewMeter(rdb, limit, shaperredis.Config{Prefix: prefix + "c:", Breaker: br})
	q := shaperredis.NewQueue(rdb, "jobs", shaper.Rate{Count: 1, Period: time.Hour},
		shaperredis.QueueConfig{MaxWait: time.Second}, shaperredis.Config{Prefix: prefix + "q:", Breaker: br})
	defer q.Close()
	for _, reg := range []func() error{
		func() error { _, err := m.RedisMeter("open", open); return err },
		func() error { _, err := m.RedisMeter("closed", closed); return err },
		func() error { _, err := m.RedisQueue("jobs", q); return err },
	} {
		if err := reg(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()

	// Admit and reject.
	for i := range 3 {
		d, err := open.AllowN(ctx, "k", 1)
		if err != nil || d.Allowed != (i < 2) || d.Degraded {
			t.Fatalf("open.AllowN #%d = %+v, %v", i, d, err)
		}
	}
	if _, err := open.AllowN(ctx, "k", 3); !errors.Is(err, shaperredis.ErrTooLarge) {
		t.Fatalf("AllowN(3) = %v, want ErrTooLarge", err)
	}
	if _, err := open.AllowN(ctx, strings.Repeat("x", 9), 1); err == nil {
		t.Fatal("AllowN with a key above MaxKeyLen: nil error")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := open.AllowN(canceled, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("AllowN(canceled ctx) = %v, want context.Canceled", err)
	}
	if d, err := closed.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("closed.AllowN = %+v, %v", d, err)
	}
	if err := q.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if err := q.Wait(ctx, 1); !errors.Is(err, shaperredis.ErrMaxWait) {
		t.Fatalf("Wait for a slot an hour away = %v, want ErrMaxWait", err)
	}
	if err := q.Wait(ctx, 2); !errors.Is(err, shaperredis.ErrTooLarge) {
		t.Fatalf("Wait(2) = %v, want ErrTooLarge", err)
	}

	// Degrade: stop Redis until the breaker opens; FailOpen admits, the
	// FailClosed meter and queue refuse.
	srv.Pause()
	degraded := int64(0)
	deadline := time.Now().Add(10 * time.Second)
	for br.State() != breaker.StateOpen {
		if time.Now().After(deadline) {
			srv.Resume()
			t.Fatalf("breaker %v after 10s of a stopped Redis", br.State())
		}
		d, err := open.AllowN(ctx, "k", 1)
		if err != nil || !d.Allowed || !d.Degraded {
			srv.Resume()
			t.Fatalf("open.AllowN while Redis is stopped = %+v, %v", d, err)
		}
		degraded++
	}
	if _, err := closed.AllowN(ctx, "k", 1); !errors.Is(err, breaker.ErrUnavailable) {
		srv.Resume()
		t.Fatalf("closed.AllowN with the breaker open = %v, want ErrUnavailable", err)
	}
	if err := q.Wait(ctx, 1); !errors.Is(err, breaker.ErrUnavailable) {
		srv.Resume()
		t.Fatalf("Wait with the breaker open = %v, want ErrUnavailable", err)
	}
	srv.Resume()

	// Recover: once the open period ends, a probe reaches Redis.
	deadline = time.Now().Add(10 * time.Second)
	for {
		d, err := open.AllowN(ctx, "r", 1)
		if err != nil || !d.Allowed {
			t.Fatalf("open.AllowN after Resume = %+v, %v", d, err)
		}
		if !d.Degraded {
			break
		}
		degraded++
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Resume")
		}
		time.Sleep(20 * time.Millisecond) // pacing only: the loop polls the breaker
	}
	if degraded == 0 {
		t.Fatal("no degraded decision")
	}

	mt := func(limiter, name string, kv ...string) string {
		return key(name, append([]string{lim, limiter, kind, "meter"}, kv...)...)
	}
	qk := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "jobs", kind, "queue"}, kv...)...)
	}
	want := map[string]int64{}
	for _, c := range []struct {
		name                                                 string
		admitted, rate, tooLarge, unavail, invalid, canceled int64
		store, failOpen                                      int64
	}{
		{"open", 2 + 1 + degraded, 1, 1, 0, 1, 1, 3 + 1, degraded},
		{"closed", 1, 0, 0, 1, 0, 0, 1, 0},
	} {
		want[mt(c.name, otelfloodgate.NameAdmitted)] = c.admitted
		want[mt(c.name, otelfloodgate.NameCanceled)] = c.canceled
		want[mt(c.name, otelfloodgate.NameRejected, rsn, "rate")] = c.rate
		want[mt(c.name, otelfloodgate.NameRejected, rsn, "too_large")] = c.tooLarge
		want[mt(c.name, otelfloodgate.NameRejected, rsn, "store_unavailable")] = c.unavail
		want[mt(c.name, otelfloodgate.NameRejected, rsn, "invalid_key")] = c.invalid
		want[mt(c.name, otelfloodgate.NameRejected, rsn, "error")] = 0
		want[mt(c.name, otelfloodgate.NameDecisions, src, "store")] = c.store
		want[mt(c.name, otelfloodgate.NameDecisions, src, "local")] = 0
		want[mt(c.name, otelfloodgate.NameDecisions, src, "fail_open")] = c.failOpen
		want[mt(c.name, otelfloodgate.NameDecisions, src, "fail_closed")] = c.unavail
	}
	for k, v := range map[string]int64{
		qk(otelfloodgate.NameAdmitted):                           1,
		qk(otelfloodgate.NameCanceled):                           0,
		qk(otelfloodgate.NameWaiting):                            0,
		qk(otelfloodgate.NameRejected, rsn, "queue_full"):        0,
		qk(otelfloodgate.NameRejected, rsn, "max_wait"):          1,
		qk(otelfloodgate.NameRejected, rsn, "deadline"):          0,
		qk(otelfloodgate.NameRejected, rsn, "too_large"):         1,
		qk(otelfloodgate.NameRejected, rsn, "store_unavailable"): 1,
		qk(otelfloodgate.NameRejected, rsn, "closed"):            0,
		qk(otelfloodgate.NameRejected, rsn, "error"):             0,
		qk(otelfloodgate.NameDecisions, src, "store"):            1,
		qk(otelfloodgate.NameDecisions, src, "local"):            0,
		qk(otelfloodgate.NameDecisions, src, "fail_open"):        0,
		qk(otelfloodgate.NameDecisions, src, "fail_closed"):      1,
	} {
		want[k] = v
	}
	diff(t, points(t, r), want)
}

const src = "floodgate.source"
