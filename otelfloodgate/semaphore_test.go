package otelfloodgate_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

// TestSemaphoreEndToEnd puts m.Observer into a real semaphore.Weighted and
// checks what a grant, a queued grant, a refusal and the releases record.
func TestSemaphoreEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		s := semaphore.New(2, semaphore.Config{MaxWaiters: 1, Observer: m.Observer("x")})
		ctx := t.Context()
		first, err := s.Hold(ctx, 2) // at once: no wait recorded
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			h, err := s.Hold(ctx, 1) // queues until first is released
			if err == nil {
				h.Release()
			}
			done <- err
		}()
		synctest.Wait()
		// The queue (MaxWaiters 1) is full: refused at once.
		if _, err := s.Hold(ctx, 1); !errors.Is(err, semaphore.ErrQueueFull) {
			t.Fatalf("third Hold: %v, want ErrQueueFull", err)
		}
		time.Sleep(time.Second)
		first.Release()
		if err := <-done; err != nil {
			t.Fatalf("queued Hold: %v", err)
		}
		got := points(t, r)
		for k, v := range sortedKeys(map[string]int64{
			"floodgate.admitted{component=semaphore}":                       2,
			"floodgate.rejected{component=semaphore,reason=queue_full}":     1,
			"floodgate.in_use{component=semaphore}":                         0,
			"floodgate.wait.duration{component=semaphore,kind=admit}#count": 1,
			"floodgate.wait.duration{component=semaphore,kind=admit}#ms":    1000,
		}) {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %d (present: %v), want %d", k, g, ok, v)
			}
		}
		if t.Failed() {
			t.Logf("points: %v", got)
		}
	})
}
