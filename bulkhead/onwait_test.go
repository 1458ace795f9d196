package bulkhead_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
)

// TestOnWait: Config.OnWait gets the layer and the time waited of a request
// granted a gate after waiting, on both the TryAcquire/Acquire path and the
// Do-only path; neither a grant at once nor a wait that ends in a refusal
// calls it.
func TestOnWait(t *testing.T) {
	type call struct {
		layer  string
		waited time.Duration
	}
	for _, tc := range []struct {
		name string
		gate func(*semaphore.Weighted) bulkhead.Gate
	}{
		{"acquire", func(w *semaphore.Weighted) bulkhead.Gate { return w }},
		{"do-only", func(w *semaphore.Weighted) bulkhead.Gate { return doOnly{w} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []call
				w := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
				b := bulkhead.New(bulkhead.Config{
					Layers: []bulkhead.Layer{{Name: "g", Gate: tc.gate(w), MaxWait: 2 * time.Second}},
					OnWait: func(layer string, waited time.Duration) { calls = append(calls, call{layer, waited}) },
				})
				ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
				ok := func(context.Context) error { return nil }
				hold := make(chan struct{})
				go b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-hold; return nil })
				synctest.Wait()
				if err := b.Do(ctx, bulkhead.Request{}, ok); !errors.Is(err, bulkhead.ErrMaxWait) {
					t.Fatalf("Do on a full gate = %v, want ErrMaxWait", err)
				}
				done := make(chan error)
				go func() { done <- b.Do(ctx, bulkhead.Request{}, ok) }()
				time.Sleep(time.Second)
				close(hold)
				if err := <-done; err != nil {
					t.Fatalf("Do granted after 1s = %v", err)
				}
				want := []call{{"g", time.Second}}
				if tc.name == "do-only" { // the first Do waited too, for no time
					want = []call{{"g", 0}, {"g", time.Second}}
				}
				if len(calls) != len(want) {
					t.Fatalf("OnWait calls %v, want %v", calls, want)
				}
				for i := range want {
					if calls[i] != want[i] {
						t.Errorf("OnWait call %d = %v, want %v", i, calls[i], want[i])
					}
				}
			})
		})
	}
}

// TestWorkersOnStart: WorkersConfig.OnStart gets each started job's class and
// the time it spent queued.
func TestWorkersOnStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type call struct {
			class  string
			queued time.Duration
		}
		calls := make(chan call, 4)
		w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
			Classes: []bulkhead.Class{{Name: "fg"}, {Name: "bg"}},
			OnStart: func(class string, queued time.Duration) { calls <- call{class, queued} },
		})
		block := make(chan struct{})
		if err := w.Submit(t.Context(), "fg", bulkhead.Job{Run: func(context.Context) error { <-block; return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := w.Submit(t.Context(), "bg", bulkhead.Job{Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		close(block)
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		close(calls)
		var got []call
		for c := range calls {
			got = append(got, c)
		}
		want := []call{{"fg", 0}, {"bg", time.Second}}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("OnStart calls %v, want %v", got, want)
		}
	})
}
