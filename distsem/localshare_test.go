package distsem_test

import (
	"errors"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestSetLocalShare: with Redis down under FailLocal, the local share set at
// run time bounds the degraded grants: growing it admits more at once,
// shrinking it admits nothing until the weight held is below it.
func TestSetLocalShare(t *testing.T) {
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(), "ls", 10, distsem.Config{Breaker: policyBreaker(), Policy: breaker.FailLocal, LocalShare: 1})
	ctx := t.Context()
	tripBreaker(t, s, srv)
	take := func() (*distsem.Permit, bool) {
		p, err := s.TryAcquire(ctx, 1)
		if err != nil {
			if !errors.Is(err, distsem.ErrLocalBusy) {
				t.Fatalf("TryAcquire on the local share: %v, want a grant or ErrLocalBusy", err)
			}
			return nil, false
		}
		if !p.Degraded() {
			t.Fatalf("TryAcquire with Redis down granted a permit that is not degraded")
		}
		return p, true
	}
	s.SetLocalShare(3)
	var held []*distsem.Permit
	for range 3 {
		p, ok := take()
		if !ok {
			t.Fatalf("TryAcquire %d of a share of 3: ErrLocalBusy", len(held)+1)
		}
		held = append(held, p)
	}
	if _, ok := take(); ok {
		t.Fatalf("TryAcquire beyond a share of 3 granted")
	}
	s.SetLocalShare(2)
	held[0].Release(ctx)
	if _, ok := take(); ok {
		t.Fatalf("TryAcquire with 2 held of a share shrunk to 2 granted")
	}
	held[1].Release(ctx)
	p, ok := take()
	if !ok {
		t.Fatalf("TryAcquire with 1 held of a share of 2: ErrLocalBusy")
	}
	p.Release(ctx)
	held[2].Release(ctx)

	func() {
		defer func() {
			if r := recover(); r != "distsem: local share < 1" {
				t.Errorf("SetLocalShare(0) panicked with %#v", r)
			}
		}()
		s.SetLocalShare(0)
	}()
	// Under another policy it does nothing (and does not panic).
	other := newSem(t, srv.Client(), "ls2", 10, distsem.Config{})
	other.SetLocalShare(5)
}
