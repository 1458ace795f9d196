package bulkhead

import "time"

// LayerStats counts what one layer did. Counters are totals since New.
type LayerStats struct {
	Name string

	Admitted uint64 // requests that passed the layer

	// Rejections, by RejectError.Reason.
	Limited     uint64 // limited: rate denials
	NoCapacity  uint64 // the gate refused: no_capacity, or its own queue_full, deadline, too_large, ...
	MaxWait     uint64 // max_wait: not granted within Layer.MaxWait
	Shed        uint64 // shed: refused by criticality (ErrShed; see Classes)
	Unavailable uint64 // unavailable: store unavailable, refused by its policy
	Errors      uint64 // error: leaf errors (configuration, unresolved failures)
	Canceled    uint64 // the request's context ended in the layer

	// Degraded counts rate decisions made by a fallback while the store was
	// unavailable (admitted or not).
	Degraded uint64

	// Refunds counts admissions of the layer's Rate given back because a
	// later step refused the request; RefundErrors, refunds that failed (the
	// store could not be reached: that quota stays spent). Both count only
	// Rates that can refund (every shaper and shaperredis meter).
	Refunds      uint64
	RefundErrors uint64

	InFlight int64         // requests holding the layer's gate now
	Waiting  int64         // requests waiting for the layer's gate now
	Waits    uint64        // waits for the gate that ended (granted or not)
	WaitTime time.Duration // total time of those waits

	// Shadow is set for a layer in shadow mode (Layer.Shadow): its
	// rejection counters count what it would have refused.
	Shadow bool

	// Classes counts by criticality class, for a layer with Classes (nil
	// otherwise), in Layer.Classes order.
	Classes []ClassStats
}

// Stats is a snapshot of a Bulkhead's counters.
type Stats struct {
	Layers []LayerStats // in Config.Layers order

	NoIdentity uint64 // refused with ErrNoIdentity
	InvalidKey uint64 // refused with ErrInvalidKey
	NoPolicy   uint64 // refused with ErrNoPolicy
	Unmatched  uint64 // passed with no layer applying to them
}

// Stats returns the counters. Each counter is read atomically; the snapshot as
// a whole is not taken at one instant.
func (b *Bulkhead) Stats() Stats {
	st := Stats{
		Layers:     make([]LayerStats, len(b.layers)),
		NoIdentity: b.noIdentity.Load(),
		InvalidKey: b.invalidKey.Load(),
		NoPolicy:   b.noPolicy.Load(),
		Unmatched:  b.unmatched.Load(),
	}
	for i := range b.layers {
		l := &b.layers[i]
		c := &l.stats
		st.Layers[i] = LayerStats{
			Name:         l.Name,
			Admitted:     c.admitted.Load(),
			Limited:      c.limited.Load(),
			NoCapacity:   c.noCapacity.Load(),
			MaxWait:      c.maxWait.Load(),
			Shed:         c.shed.Load(),
			Unavailable:  c.unavailable.Load(),
			Errors:       c.errors.Load(),
			Canceled:     c.canceled.Load(),
			Degraded:     c.degraded.Load(),
			Refunds:      c.refunds.Load(),
			RefundErrors: c.refundErrors.Load(),
			InFlight:     c.inFlight.Load(),
			Waiting:      l.waits.Waiting.Load(),
			Waits:        l.waits.Count.Load(),
			WaitTime:     time.Duration(l.waits.Nanos.Load()),
			Shadow:       l.Shadow,
		}
		if l.shed != nil {
			st.Layers[i].Classes = l.shed.snapshot()
		}
	}
	return st
}

// Layer returns the stats of the layer named name, and whether there is one.
func (st Stats) Layer(name string) (LayerStats, bool) {
	for _, l := range st.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return LayerStats{}, false
}
