package shaper

import "time"

// RefundAt is Refund at time t instead of now, for the property tests: m is
// one of the keyed local meters.
func RefundAt(m any, key string, t time.Time, n int64, d Decision) {
	now := t.UnixMicro()
	switch m := m.(type) {
	case *Meter:
		m.c.refund(key, now, n, d)
	case *TokenBucket:
		m.c.refund(key, now, n, d)
	case *FixedWindow:
		m.c.refund(key, now, n, d)
	case *SlidingLog:
		m.c.refund(key, now, n, d)
	case *SlidingCounter:
		m.c.refund(key, now, n, d)
	default:
		panic("RefundAt: not a keyed local meter")
	}
}
