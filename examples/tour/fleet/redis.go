package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	floodgate "github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/examples/internal/tour"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// redisBackend makes limiters shared through the Redis at addr: one go-redis
// client per simulated pod, as separate processes would have. Every run uses
// fresh keys, so runs never see each other's state. The returned function
// closes the limiters and the clients.
func redisBackend(ctx context.Context, addr string, pods int) (*tour.Backend, func(), error) {
	clients := make([]*redis.Client, pods)
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for i := range clients {
		// A pool as large as job 1's callers per pod, so that their
		// simultaneous first calls do not queue for a connection.
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second, PoolSize: 64})
		clients[i] = c
		closers = append(closers, func() { c.Close() })
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := clients[0].Ping(pctx).Err(); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("redis at %s is unreachable (%v); start one (redis-server --port 6379), or run the tour without Redis: go -C examples run ./tour", addr, err)
	}
	var b [4]byte
	rand.Read(b[:])
	prefix := "floodgate-tour:" + hex.EncodeToString(b[:]) + ":"
	return &tour.Backend{
		Name:   "shared (Redis)",
		Shared: true,
		Gate: func(pod int, name string, limit int64) floodgate.Gate {
			s := distsem.New(clients[pod], prefix+name, limit, distsem.Config{})
			closers = append(closers, func() { s.Close() })
			return s
		},
		Keyed: func(pod int, name string, limit int64) floodgate.KeyedGate {
			k := distsem.NewKeyed(clients[pod], prefix+name+":", limit, distsem.KeyedConfig{})
			closers = append(closers, func() { k.Close() })
			return k
		},
		Rate: func(pod int, name string, lim shaper.Limit) bulkhead.Rate {
			return shaperredis.NewMeter(clients[pod], lim, shaperredis.Config{Prefix: prefix + name + ":"})
		},
		Pacer: func(pod int, name string, r shaper.Rate) (bulkhead.Pacer, func()) {
			q := shaperredis.NewQueue(clients[pod], prefix+name, r, shaper.QueueConfig{}, shaperredis.Config{})
			return q, q.Close
		},
	}, closeAll, nil
}
