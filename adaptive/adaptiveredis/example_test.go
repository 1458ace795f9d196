package adaptiveredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/adaptive/adaptiveredis"
	"github.com/floodgate-go/floodgate/breaker"
)

// Every process of the fleet makes the same Gate: together they admit what
// the downstream can take, found from its latency. Under FailLocal, while
// Redis is unreachable, each process admits up to the fleet limit it last
// knew divided by the processes it saw.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	g := adaptiveredis.New(rdb, "replica-reports", adaptiveredis.Config{
		Min: 2, Max: 200, Initial: 10,
		Policy: breaker.FailLocal,
	})
	defer g.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := g.Hold(ctx, 1)
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	defer h.Release() // the hold time is the fleet's latency sample
	runReport(h.Context())
}

func runReport(context.Context) {}
