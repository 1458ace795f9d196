package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ScriptUsec returns the µs Redis has spent in script calls, EVALSHA and
// EVAL, by INFO commandstats: Redis-wide, so a benchmark reading it needs a
// server of its own. Redis 7 also lists the commands a script makes on lines
// of their own; their time is part of the script call's, so adding them
// would count it twice.
func ScriptUsec(tb testing.TB, rdb redis.UniversalClient) int64 {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var usec int64
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				usec += n
			}
		}
	}
	return usec
}
