package shaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/shapertest"
	"github.com/floodgate-go/floodgate/shaper"
)

// TestRefundAsIfNeverCame: for every keyed meter, an admission refunded
// (at once or after a delay, across windows) leaves every later decision
// equal to that of a meter that never saw it.
func TestRefundAsIfNeverCame(t *testing.T) {
	seqs := 300
	if testing.Short() {
		seqs = 60
	}
	for _, a := range shapertest.Algos {
		s := shapertest.RefundSubject{Name: a.String(), Algo: a,
			Fresh: func(_ *testing.T, lim shaper.Limit) (shapertest.Call, shapertest.Refund) {
				m := newKeyed(a, lim).(interface {
					AllowNAt(string, time.Time, int64) (shaper.Decision, error)
					RefundAt(string, time.Time, int64, shaper.Decision)
				})
				return func(at, n int64) (shaper.Decision, error) { return m.AllowNAt("k", time.UnixMicro(at), n) },
					func(at, n int64, d shaper.Decision) error {
						m.RefundAt("k", time.UnixMicro(at), n, d)
						return nil
					}
			}}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckRefund(t, s, seqs, 60) })
	}
	s := shapertest.RefundSubject{Name: "Limiter", Algo: shapertest.GCRA,
		Fresh: func(_ *testing.T, lim shaper.Limit) (shapertest.Call, shapertest.Refund) {
			l := shaper.NewLimiter(lim)
			return func(at, n int64) (shaper.Decision, error) { return l.AllowNAt(time.UnixMicro(at), n) },
				func(at, n int64, d shaper.Decision) error {
					l.RefundAt(time.UnixMicro(at), n, d)
					return nil
				}
		}}
	t.Run(s.Name, func(t *testing.T) { shapertest.CheckRefund(t, s, seqs, 60) })
}

// TestRefundGCRANeverMoreThanFresh: a GCRA refund after the key was used
// again by others never gives more than a fresh key: the arrival time never
// goes before now.
func TestRefundGCRANeverMoreThanFresh(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(10), Burst: 5}
	m := shaper.NewMeter(lim)
	t0 := time.UnixMicro(shapertest.T0)
	d, _ := m.AllowNAt("k", t0, 5)
	// The key falls idle (500 ms later its debt is paid), then one call.
	m.AllowNAt("k", t0.Add(time.Second), 1)
	m.RefundAt("k", t0.Add(time.Second), 5, d)
	if got, _ := m.AllowNAt("k", t0.Add(time.Second), 0); got.Remaining > lim.Burst {
		t.Errorf("after a late refund: %d remaining, more than a fresh key's %d", got.Remaining, lim.Burst)
	}
	for i := range 6 {
		if got, _ := m.AllowNAt("k", t0.Add(time.Second), 1); got.Allowed != (i < 5) {
			t.Fatalf("call %d at the refund's time: Allowed %v, want %v (a fresh key's burst of 5, no more)", i, got.Allowed, i < 5)
		}
	}
}

// TestRefundOnlyWhatWasCharged: a denial and a peek give nothing back.
func TestRefundOnlyWhatWasCharged(t *testing.T) {
	ctx := context.Background()
	m := shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerHour(2)})
	for range 2 {
		if d, err := m.AllowN("k", 1); err != nil || !d.Allowed {
			t.Fatalf("AllowN: %+v, %v", d, err)
		}
	}
	denied, _ := m.AllowN("k", 1)
	peek, _ := m.AllowN("k", 0)
	if denied.Allowed || !peek.Allowed {
		t.Fatalf("third call %+v, peek %+v: want denied, then allowed", denied, peek)
	}
	m.Refund(ctx, "k", 1, denied)
	m.Refund(ctx, "k", 0, peek)
	if d, _ := m.AllowN("k", 0); d.Remaining != 0 {
		t.Errorf("after refunding a denial and a peek: %d remaining, want 0", d.Remaining)
	}
	if st := m.Stats(); st.Refunded != 0 {
		t.Errorf("Stats().Refunded = %d, want 0", st.Refunded)
	}
}
