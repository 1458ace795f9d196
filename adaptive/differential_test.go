package adaptive_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/semaphore"
)

// TestPinnedGateIsASemaphore runs one random sequence of Hold (some with a
// context that ends while waiting), TryHold, weights too large, Release and
// Drop through an adaptive.Gate pinned at Min = Max = 4 and through the
// semaphore.Weighted of 4 it stands for, and compares what a caller sees at
// every step: granted or not, the refusal's reason, who is waiting, the
// weight in use. The adaptive gate adds a limit that moves; with the limit
// pinned, it must be the semaphore exactly, error paths included.
func TestPinnedGateIsASemaphore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 4
		ag := adaptive.New(adaptive.Config{Min: limit, Max: limit, MinSamples: 5, MinRound: time.Millisecond})
		sg := semaphore.New(limit, semaphore.Config{})
		type side struct {
			gate floodgate.Gate
			held []floodgate.Held
		}
		sides := [2]*side{{gate: ag}, {gate: sg}}
		rng := rand.New(rand.NewPCG(7, 7))
		outcome := func(err error) string {
			switch {
			case err == nil:
				return "ok"
			case errors.Is(err, context.DeadlineExceeded):
				return "deadline exceeded"
			default:
				return string(reject.ReasonOf(err))
			}
		}
		for step := range 2000 {
			op, n := rng.IntN(5), int64(1+rng.IntN(2))
			if rng.IntN(20) == 0 {
				n = limit + 1 // never fits: ErrTooLarge from both
			}
			var got [2]string
			for i, s := range sides {
				switch op {
				case 0, 1: // TryHold
					h, err := s.gate.TryHold(t.Context(), n)
					if err == nil {
						s.held = append(s.held, h)
					}
					got[i] = "try " + outcome(err)
				case 2: // Hold, giving up after 1ms of waiting
					ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
					h, err := s.gate.Hold(ctx, n)
					if err == nil {
						s.held = append(s.held, h)
					}
					cancel()
					got[i] = "hold " + outcome(err)
				default: // Release (Drop, for the adaptive gate, now and then)
					if len(s.held) == 0 {
						got[i] = "none held"
						continue
					}
					h := s.held[0]
					s.held = s.held[1:]
					if i == 0 && op == 4 {
						ag.Drop(h)
					} else {
						h.Release()
					}
					got[i] = "released"
				}
			}
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			if got[0] != got[1] {
				t.Fatalf("step %d (op %d, n %d): adaptive %q, semaphore %q", step, op, n, got[0], got[1])
			}
			if a, s := ag.Stats(), sg.Stats(); a.InFlight != s.InUse || a.Waiting != s.Waiting || a.Limit != s.Limit {
				t.Fatalf("step %d: adaptive in flight %d waiting %d limit %d, semaphore %d %d %d", step, a.InFlight, a.Waiting, a.Limit, s.InUse, s.Waiting, s.Limit)
			}
		}
		if st := ag.Stats(); st.Rounds == 0 {
			t.Fatalf("no round decided: the pinned gate's controller never ran (%+v)", st)
		}
	})
}
