package otelfloodgate

// The adapters of shaperredis, kept in this one file.

import (
	"context"

	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"go.opentelemetry.io/otel/metric"
)

// Lease observes a token lease's Stats as floodgate.admitted (cost served from
// leased tokens or the local allowance), floodgate.rejected (rate) and
// floodgate.lease.renewals (refill calls, outcome ok or failure). The Redis
// meter behind it reports its decisions through its breaker (see
// [Metrics.Breaker]).
func (m *Metrics) Lease(name string, l *shaperredis.Lease) (metric.Registration, error) {
	base := observe(attrs(name, KindLease))
	rate := observe(attrs(name, KindLease, KeyReason.String(ReasonRate)))
	ok := observe(attrs(name, KindLease, KeyOutcome.String("ok")))
	failed := observe(attrs(name, KindLease, KeyOutcome.String("failure")))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := l.Stats()
		o.ObserveInt64(m.admitted, st.Served+st.Local, base...)
		o.ObserveInt64(m.rejected, st.Rejected, rate...)
		o.ObserveInt64(m.leaseRenewals, st.Refills-st.Errors, ok...)
		o.ObserveInt64(m.leaseRenewals, st.Errors, failed...)
		return nil
	}, m.admitted, m.rejected, m.leaseRenewals)
}
