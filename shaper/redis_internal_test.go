package shaper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// The tests in this file use the unexported RedisMeter.now hook, which passes a
// chosen time to the scripts instead of Redis TIME, so that the Redis and the
// in-process implementation of each algorithm can be fed the same times.

var kindNames = [...]string{"gcra", "tokenbucket", "fixedwindow", "slidinglog", "slidingcounter"}

// randomLimit returns a limit valid for kind: periods from 1ms to 10s, counts
// from 1 to 50, bursts from 1 to 20 where the algorithm has one.
func randomLimit(r *rand.Rand, kind algoKind) Limit {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond,
		time.Second, 3 * time.Second, 10 * time.Second, 1234567 * time.Microsecond}
	lim := Limit{Rate: Rate{Count: 1 + r.Int64N(50), Period: periods[r.IntN(len(periods))]}}
	if !kinds[kind].window {
		lim.Burst = 1 + r.Int64N(20)
	}
	return lim
}

// randomStep returns the next time (µs) and cost of a random sequence: mostly
// short steps around the emission interval, sometimes none, sometimes a long
// idle spell, sometimes a step back in time.
func randomStep(r *rand.Rand, now int64, lim Limit, max int64) (int64, int64) {
	p := int64(lim.Rate.Period / time.Microsecond)
	t := max64(1, p/lim.Rate.Count)
	switch x := r.IntN(100); {
	case x < 25:
	case x < 70:
		now += r.Int64N(2*t + 1)
	case x < 85:
		now += r.Int64N(3*p + 1)
	case x < 95:
		now += r.Int64N(20 * t)
	default:
		now -= r.Int64N(2*t + 1)
	}
	n := int64(1)
	switch x := r.IntN(10); {
	case x < 1:
		n = 0
	case x < 3:
		n = r.Int64N(max + 1)
	}
	return now, n
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestRedisDifferential replays random (time, cost) sequences, with occasional
// limit changes, against each algorithm's in-process meter and its Redis script,
// and requires identical decisions (allowed, remaining, retry-after, reset-after).
func TestRedisDifferential(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	seqs, steps := 12, 250
	if s := os.Getenv("SHAPER_DIFF_SEQS"); s != "" {
		seqs, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		seqs = 3
	}
	for kind := range kinds {
		t.Run("algo="+kindNames[kind], func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			r := rand.New(rand.NewPCG(seed, uint64(kind)))
			t.Logf("seed %d", seed)
			var allowed, denied int
			for s := range seqs {
				lim := randomLimit(r, algoKind(kind))
				local := newLocal(algoKind(kind), lim)
				var now int64 = 1_700_000_000_000_000 + r.Int64N(1e12)
				rm := newRedisMeter(algoKind(kind), db.Client, lim, RedisConfig{Prefix: db.Prefix + kindNames[kind] + ":"})
				rm.now = func() int64 { return now }
				key := fmt.Sprintf("k%d", s)
				max := lim.burst()
				for i := range steps {
					if r.IntN(100) == 0 { // change the limit on both sides
						lim = randomLimit(r, algoKind(kind))
						max = lim.burst()
						rm.SetLimit(lim)
						switch l := local.(type) {
						case *Meter:
							l.SetLimit(lim)
						case *TokenBucket:
							l.SetLimit(lim)
						case *FixedWindow:
							l.SetLimit(lim)
						case *SlidingLog:
							l.SetLimit(lim)
						case *SlidingCounter:
							l.SetLimit(lim)
						}
					}
					var n int64
					now, n = randomStep(r, now, lim, max)
					want, werr := localAt(local, key, now, n)
					got, gerr := rm.AllowN(ctx, key, n)
					if werr != nil || gerr != nil {
						t.Fatalf("seq %d step %d (%v, t=%d, n=%d): local err %v, redis err %v", s, i, lim, now, n, werr, gerr)
					}
					if got.Allowed {
						allowed++
					} else {
						denied++
					}
					if got != want {
						t.Fatalf("seq %d step %d (%v, t=%d, n=%d):\nredis %+v\nlocal %+v", s, i, lim, now, n, got, want)
					}
				}
			}
			if allowed == 0 || denied == 0 {
				t.Errorf("%d allowed and %d denied: the sequences do not exercise both answers", allowed, denied)
			}
		})
	}
}

func localAt(m localMeter, key string, now, n int64) (Decision, error) {
	t := time.UnixMicro(now)
	switch l := m.(type) {
	case *Meter:
		return l.AllowNAt(key, t, n)
	case *TokenBucket:
		return l.AllowNAt(key, t, n)
	case *FixedWindow:
		return l.AllowNAt(key, t, n)
	case *SlidingLog:
		return l.AllowNAt(key, t, n)
	case *SlidingCounter:
		return l.AllowNAt(key, t, n)
	}
	panic("unknown meter")
}
