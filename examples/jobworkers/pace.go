package main

// TODO(merge): shaper.NewRedisQueue → shaperredis.NewQueue (and
// shaper.RedisConfig → shaperredis.Config).

import (
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/redis/go-redis/v9"
)

// newPace returns the fleet-wide start schedule every worker shares.
func newPace(rdb *redis.Client) *shaper.RedisQueue {
	return shaper.NewRedisQueue(rdb, *name+":starts", shaper.PerSecond(*rate), shaper.QueueConfig{}, shaper.RedisConfig{})
}
