package storecall_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/storecall"
)

func TestCheckPanics(t *testing.T) {
	noTimeout := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noTimeout.Close()
	noTimeoutCluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer noTimeoutCluster.Close()
	noTimeoutRing := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer noTimeoutRing.Close()
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   string
	}{
		{"nil", nil, "pkg: nil client"},
		{"typed nil Client", (*redis.Client)(nil), "pkg: nil client"},
		{"typed nil ClusterClient", (*redis.ClusterClient)(nil), "pkg: nil client"},
		{"typed nil Ring", (*redis.Ring)(nil), "pkg: nil client"},
		{"Client without ContextTimeoutEnabled", noTimeout, "pkg: client without ContextTimeoutEnabled"},
		{"ClusterClient without ContextTimeoutEnabled", noTimeoutCluster, "pkg: client without ContextTimeoutEnabled"},
		{"Ring without ContextTimeoutEnabled", noTimeoutRing, "pkg: client without ContextTimeoutEnabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != tc.want {
					t.Errorf("New panicked with %#v, want %q", r, tc.want)
				}
			}()
			storecall.New("pkg", tc.client, nil, "x")
		})
	}
}

func TestNewBreaker(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	s := storecall.New("pkg", c, nil, "own")
	if s.Client != c || s.Breaker == nil || s.Breaker.Name() != "own" {
		t.Fatalf("New without a breaker = %+v", s)
	}
	if got := s.Breaker.CallTimeout(); got != breaker.DefaultCallTimeout {
		t.Errorf("own breaker's CallTimeout = %v, want %v", got, breaker.DefaultCallTimeout)
	}
	shared := breaker.New("shared", breaker.Config{})
	if s := storecall.New("pkg", c, shared, "own"); s.Breaker != shared {
		t.Errorf("New with a breaker did not use it")
	}
}

func TestDoPassesClientAndDeadline(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	s := storecall.New("pkg", c, nil, "own")
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	v, src, err := storecall.Do(ctx, &s, breaker.FailClosed, func(cctx context.Context, client redis.UniversalClient) (int, error) {
		if client != c {
			t.Errorf("call got client %v, want the Store's", client)
		}
		if cctx.Value(key{}) != "v" {
			t.Errorf("call's context lost the caller's values")
		}
		if _, ok := cctx.Deadline(); !ok {
			t.Errorf("call's context has no deadline")
		}
		return 7, nil
	}, nil)
	if v != 7 || src != breaker.FromStore || err != nil {
		t.Fatalf("Do = %v, %v, %v", v, src, err)
	}
}

// TestProbeInstalledUnlessSet: a breaker without a Probe gets a PING on the
// store's client (a probe that reaches the dead address fails), and a
// breaker with one keeps its own.
func TestProbeInstalledUnlessSet(t *testing.T) {
	// One dial a call: go-redis dials a refused address 5 times, 100 ms
	// apart, by default, and at half a second a call the probe once ran
	// past the 5 s bound in a loaded CI run; with one dial every call here
	// fails in a few ms.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	refused := func(context.Context, redis.UniversalClient) (int, error) {
		return 0, c.Ping(context.Background()).Err() // connection refused: a store failure
	}
	answered := func(context.Context, redis.UniversalClient) (int, error) { return 0, nil }
	// trip opens s's breaker and calls until a probe has run: a call that
	// finds the open period over starts it. The calls after the first
	// succeed, so one that comes after a probe closed the breaker keeps it
	// closed. (Waiting for StateHalfOpen instead raced: State() itself
	// moves an expired open period to half-open, and in a loaded run that
	// could happen before any call had started a probe.)
	trip := func(s *storecall.Store) {
		storecall.Do(context.Background(), s, breaker.FailOpen, refused, nil)
		for s.Breaker.Stats().Probes == 0 {
			time.Sleep(time.Millisecond)
			storecall.Do(context.Background(), s, breaker.FailOpen, answered, nil)
		}
	}
	cfg := breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Millisecond, Jitter: -1, MaxOpenDuration: time.Millisecond}

	s := storecall.New("pkg", c, breaker.New("ping", cfg), "")
	trip(&s)
	floodgatetest.Eventually(t, 5*time.Second, "the installed PING probe fails", func() bool { return s.Breaker.Stats().ProbeFailures > 0 })

	mine := make(chan struct{}, 1)
	cfg.Probe = func(context.Context) error {
		select {
		case mine <- struct{}{}:
		default:
		}
		return nil
	}
	s = storecall.New("pkg", c, breaker.New("own", cfg), "")
	trip(&s)
	select {
	case <-mine:
	case <-time.After(5 * time.Second):
		t.Fatal("the breaker's own Probe was not called")
	}
	floodgatetest.Eventually(t, 5*time.Second, "closed by its own probe", func() bool { return s.Breaker.State() == breaker.StateClosed })
}
