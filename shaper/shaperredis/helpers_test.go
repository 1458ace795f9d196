package shaperredis_test

import "github.com/redis/go-redis/v9"

// deadClient returns a client to an address where nothing listens.
func deadClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
}
