package reject_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/reject"
)

var errFull = errors.New("pkg: queue full")

func TestError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", reject.New(errFull, 3*time.Second))
	if !errors.Is(err, errFull) {
		t.Errorf("errors.Is(%v, errFull) = false, want true", err)
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() != 3*time.Second {
		t.Errorf("RetryAfter via errors.As = %v, want 3s", ra)
	}
	if got := reject.New(errFull, -time.Second).RetryAfter(); got != 0 {
		t.Errorf("New(reason, -1s).RetryAfter() = %v, want 0", got)
	}
	if got, want := reject.New(errFull, 0).Error(), "pkg: queue full"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
