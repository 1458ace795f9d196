package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CmdStat is one command's line of INFO commandstats: its calls and the µs
// spent in it.
type CmdStat struct{ Calls, Usec int64 }

// ParseCommandStats parses INFO commandstats into each command's calls and
// usec, by the name Redis gives it (lower case; "client|setinfo" for a
// subcommand).
func ParseCommandStats(info string) map[string]CmdStat {
	st := map[string]CmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		name, ok = strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		var s CmdStat
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.Calls = n
			case "usec":
				s.Usec = n
			}
		}
		st[name] = s
	}
	return st
}

// CommandStats reads INFO commandstats of the server rdb talks to.
func CommandStats(tb testing.TB, rdb redis.UniversalClient) map[string]CmdStat {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	return ParseCommandStats(s)
}

// ScriptCommands are the commands whose usec includes the commands they call.
var ScriptCommands = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true,
	"fcall": true, "fcall_ro": true,
}

// ScriptUsec returns the µs Redis has spent in script calls (ScriptCommands),
// by INFO commandstats: Redis-wide, so a benchmark reading it needs a server
// of its own. Redis 7 also lists the commands a script makes on lines of
// their own; their time is part of the script call's, so adding them would
// count it twice.
func ScriptUsec(tb testing.TB, rdb redis.UniversalClient) int64 {
	tb.Helper()
	var usec int64
	for name, s := range CommandStats(tb, rdb) {
		if base, _, _ := strings.Cut(name, "|"); ScriptCommands[base] {
			usec += s.Usec
		}
	}
	return usec
}
