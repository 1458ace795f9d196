package adaptiveredis

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestCluster: on a 3-node Redis Cluster, gates whose names hash to
// different slots hold, flush and close rounds with no CROSSSLOT error: all
// their keys, the semaphore's included, are under one hash tag.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, name := range []string{"alpha", "bravo", "charlie", "delta"} {
		t.Run(name, func(t *testing.T) {
			g := quietGate(t, c.Client, name, Config{Initial: 5})
			h, err := g.Hold(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			g.flush() // initialises: one close call
			h.Release()
			g.flush()
			s := g.Stats()
			if s.FlushErrors != 0 || s.CloseErrors != 0 || s.SetLimitErrors != 0 || s.Flushes != 2 || s.Round != 1 {
				t.Fatalf("stats after two flushes on Cluster: %+v", s)
			}
			r := flushOnce(t, g, 1, 0, 0, g.ver)
			if r.semLimit != 5 || r.ver != 1 {
				t.Errorf("flush on Cluster: semaphore limit %d, version %d; want 5, 1", r.semLimit, r.ver)
			}
		})
	}
}
