package main

import (
	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// newPace returns the fleet-wide start schedule every worker shares.
func newPace(rdb *redis.Client, obs floodgate.Observer) *shaperredis.Queue {
	return shaperredis.NewQueue(rdb, *name+":starts", shaper.PerSecond(*rate), shaper.QueueConfig{}, shaperredis.Config{Observer: obs})
}
