package storecall_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/storecall"
)

// TestClockDeadline: a script deadline is the call's deadline in Unix µs plus
// Slack, 0 without a deadline; an expired reply from a Redis whose clock is
// ahead, received while the call still has time, is learned (later deadlines
// move by that much) and allows one more send; a reply from a Redis that is
// not ahead teaches nothing; once the call's time is up, or for a nil Clock,
// nothing more is sent.
func TestClockDeadline(t *testing.T) {
	var c storecall.Clock
	if got := c.Deadline(context.Background()); got != 0 {
		t.Errorf("Deadline without a deadline: %d, want 0", got)
	}
	dl := time.Now().Add(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	slack := int64(storecall.Slack / time.Microsecond)
	if got, want := c.Deadline(ctx), dl.UnixMicro()+slack; got != want {
		t.Errorf("Deadline: %d, want %d", got, want)
	}

	// Redis 5s ahead: its script saw the deadline passed while we wait.
	ahead := int64(5 * time.Second / time.Microsecond)
	if !c.Expired(ctx, time.Now().UnixMicro()+ahead) {
		t.Errorf("Expired with time left: false, want true (send again)")
	}
	got := c.Deadline(ctx) - dl.UnixMicro() - slack
	if got < ahead-int64(time.Second/time.Microsecond) || got > ahead {
		t.Errorf("learned offset %dµs, want about %dµs", got, ahead)
	}
	// A Redis behind us teaches nothing; the offset never goes down.
	c.Expired(ctx, time.Now().UnixMicro()-ahead)
	if again := c.Deadline(ctx) - dl.UnixMicro() - slack; again != got {
		t.Errorf("offset after a reply from behind: %dµs, want %dµs", again, got)
	}

	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel2()
	if c.Expired(past, time.Now().UnixMicro()) {
		t.Errorf("Expired with the call's time up: true, want false")
	}
	var nilClock *storecall.Clock
	if got, want := nilClock.Deadline(ctx), dl.UnixMicro()+slack; got != want {
		t.Errorf("nil Clock Deadline: %d, want %d", got, want)
	}
	if !nilClock.Expired(ctx, time.Now().UnixMicro()+ahead) || nilClock.Deadline(ctx) != dl.UnixMicro()+slack {
		t.Errorf("nil Clock learned or refused a retry")
	}
}
