package storecall_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
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
