package shaperredis_test

import (
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// deadClient returns a client to an address where nothing listens.
func deadClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
}

// lostToGaps returns the admissions that a limit of rate and burst had to
// give while no call ended, in a run of d whose calls ended at the times in
// done (since the start, per goroutine): a gap g with no reply costs
// rate·g − burst, capacity no caller asked for (on a loaded machine
// redis-server or the callers are descheduled). A lower bound on what a run
// admits is only meaningful less this.
func lostToGaps(done [][]time.Duration, d time.Duration, rate, burst float64) (lost float64, gaps int) {
	all := []time.Duration{0}
	for _, ts := range done {
		all = append(all, ts...)
	}
	slices.Sort(all)
	if all[len(all)-1] < d {
		all = append(all, d) // no reply at the end of the run either
	}
	for i := 1; i < len(all); i++ {
		if l := rate*(all[i]-all[i-1]).Seconds() - burst; l > 0 {
			lost += l
			gaps++
		}
	}
	return lost, gaps
}
