package shaperredis

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/internal/shapertest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/redis/go-redis/v9"
)

// TestRedisRefundAsIfNeverCame is shaper's TestRefundAsIfNeverCame for the
// Redis refund scripts, fed chosen times: an admission refunded (at once or
// later) leaves every later decision equal to that of a meter that never saw
// it.
func TestRedisRefundAsIfNeverCame(t *testing.T) {
	db := redistest.Connect(t)
	seqs := 15
	if testing.Short() {
		seqs = 4
	}
	seq := 0
	for kind := range algoKind(len(kinds)) {
		s := shapertest.RefundSubject{Name: "Redis" + kindNames[kind], Algo: algoOf[kind],
			Fresh: func(t *testing.T, lim shaper.Limit) (shapertest.Call, shapertest.Refund) {
				seq++
				rm := newMeter(kind, db.Client, lim, Config{Prefix: db.Prefix + "refund:" + kindNames[kind] + ":"})
				key := "r" + strconv.Itoa(seq)
				return func(at, n int64) (shaper.Decision, error) {
						return allowAt(context.Background(), rm, key, at, n)
					}, func(at, n int64, d shaper.Decision) error {
						if !d.Allowed {
							return nil
						}
						_, err := refundAt(context.Background(), rm, key, at, n, d)
						return err
					}
			}}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckRefund(t, s, seqs, 40) })
	}
}

// TestRedisRefundDifferential: the same admissions and refunds at the same
// times on a Redis meter and its in-process twin give the same decisions
// afterwards, field by field.
func TestRedisRefundDifferential(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	for kind := range algoKind(len(kinds)) {
		t.Run(kindNames[kind], func(t *testing.T) {
			lim := shaper.Limit{Rate: shaper.PerSecond(10), Burst: 4}
			if kinds[kind].window {
				lim.Burst = 0
			}
			rm := newMeter(kind, db.Client, lim, Config{Prefix: db.Prefix + "refdiff:" + kindNames[kind] + ":"})
			local := newLocal(kind, lim)
			at := func(us int64) time.Time { return time.UnixMicro(us) }
			now := shapertest.T0
			for i := range 200 {
				n := int64(1 + i%3)
				want, _ := localAt(local, "k", now, n)
				got, err := allowAt(ctx, rm, "k", now, n)
				if err != nil {
					t.Fatal(err)
				}
				if got != want { // every field, the refund stamp included
					t.Fatalf("step %d (t=%d n=%d): redis %+v, local %+v", i, now, n, got, want)
				}
				if got.Allowed && i%2 == 0 { // refund every other admission, a little later
					now += int64(i%7) * 10_000
					if _, err := refundAt(ctx, rm, "k", now, n, got); err != nil {
						t.Fatal(err)
					}
					local.RefundAt("k", at(now), n, want)
				}
				now += int64(i%5) * 30_000
			}
		})
	}
}

// TestRedisRefundBestEffort: a refund while Redis refuses connections
// returns the store's error (counted), never panics or waits past its
// bound; a FailOpen admission charged
// nothing and a FailLocal one is refunded in the local meter.
func TestRedisRefundBestEffort(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	lim := shaper.Limit{Rate: shaper.PerHour(2)}
	m := NewMeter(rdb, lim, Config{Breaker: breaker.New("refund-test", breaker.Config{CallTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a cancelled request still tries to refund
	start := time.Now()
	err := m.Refund(ctx, "k", 1, shaper.Decision{Allowed: true, Limit: lim})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Refund with Redis down = %v, want the store's error", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Refund with Redis down took %v", el)
	}
	if st := m.Stats(); st.RefundErrors != 1 {
		t.Errorf("RefundErrors = %d, want 1", st.RefundErrors)
	}
	open := NewMeter(rdb, lim, Config{Policy: breaker.FailOpen, Breaker: breaker.New("refund-open", breaker.Config{Logger: slog.New(slog.DiscardHandler)})})
	if err := open.Refund(context.Background(), "k", 1, shaper.Decision{Allowed: true, Degraded: true, Limit: lim}); err != nil {
		t.Errorf("Refund of a FailOpen admission = %v, want nil (nothing charged)", err)
	}
	fl := NewMeter(rdb, lim, Config{Policy: breaker.FailLocal, Breaker: breaker.New("refund-local", breaker.Config{Logger: slog.New(slog.DiscardHandler)})})
	for range 2 {
		d, err := fl.AllowN(context.Background(), "k", 1)
		if err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("FailLocal AllowN with Redis down: %+v, %v", d, err)
		}
		if err := fl.Refund(context.Background(), "k", 1, d); err != nil {
			t.Fatalf("Refund of a FailLocal admission: %v", err)
		}
	}
	if d, _ := fl.local.AllowN("k", 0); d.Remaining != 2 {
		t.Errorf("FailLocal meter after 2 admissions refunded: %d remaining, want 2", d.Remaining)
	}
}
