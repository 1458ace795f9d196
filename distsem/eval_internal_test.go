package distsem

import (
	"context"
	"fmt"
	"strings"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// eval runs sc (acquire.lua, release.lua or renew.lua, as built, changed by a
// test or of an earlier version) with tok and the script's own arguments in
// the order they had as strings before the numbers were packed (see nums):
//
//	acquire: weight, lease ms, queue (0 or 1), heartbeat TTL ms, notify id[, deadline µs]
//	release: tombstone TTL ms, new limit (0 to keep), always tombstone (0 or 1), weight (0 if unknown)
//	renew:   weight, lease ms, fence, mode (0, 1 re-adopt, carryArg)
//
// It sends them as sc takes them: packed for a script that unpacks ARGV[2]
// (see head.lua; the notify id then goes in the numbers argument, padded to
// idLen), each a string for one of an earlier version. The call is
// bounded by the breaker's CallTimeout, without the breaker (see run and
// call): the script tests call the scripts directly.
func (s *Semaphore) eval(ctx context.Context, sc *redisscript.Script, tok any, args ...any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	src := sc.Source()
	var cmd []any
	if strings.Contains(src, "struct.unpack('<dddddddd', ARGV[2])") {
		var n *nums
		var extra []any
		switch {
		case strings.Contains(src, "\n-- acquire.lua: "):
			// weight and notify id as strings; lease, queue, heartbeat and
			// deadline packed.
			var dl int64
			if len(args) > 5 {
				dl = num(args[5])
			}
			n = s.nums(num(args[1]), num(args[2]), num(args[3]), dl, num(args[0]))
			// The notify id is at a fixed place of length idLen (see
			// nums): a test's shorter one is padded with zeros.
			id := args[4].(string)
			copy((*n)[numsLen:numsLen+idLen], strings.Repeat("0", idLen-len(id))+id)
		case strings.Contains(src, "\n-- release.lua: "):
			n = s.nums(num(args[0]), num(args[1]), num(args[2]), num(args[3]), 0)
		case strings.Contains(src, "\n-- renew.lua: "):
			// weight and fence as strings; lease and mode packed.
			n, extra = s.nums(num(args[1]), num(args[3]), 0, 0, 0), []any{args[0], args[2]}
		default:
			panic("eval: not a distsem script")
		}
		cmd = s.command(tok, n, extra...)
	} else {
		// ARGV[1..5]: token, limit, key TTL, publish command, channel prefix.
		pub := "publish"
		if s.sharded {
			pub = "spublish"
		}
		cmd = append(append([]any(nil), s.cmdHead[:argTok]...), tok, s.limit, s.keyTTL, pub, s.chanPrefix)
		cmd = append(cmd, args...)
	}
	return run(ctx, s.client, sc, cmd)
}

// num returns a test's numeric argument as an int64.
func num(a any) int64 {
	switch v := a.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	}
	panic(fmt.Sprintf("eval: argument %v (%T) is not an integer", a, a))
}
