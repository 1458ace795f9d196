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
// It sends them as sc takes them: in ARGV[2]'s numbers for a script that
// unpacks them there (see head.lua; the notify id goes there too, padded to
// idLen), in ARGV[4]'s numbers and strings after them for one of 6be374c,
// and each a string for one of an earlier version. The call is bounded by
// the breaker's CallTimeout, without the breaker (see run and call): the
// script tests call the scripts directly.
func (s *Semaphore) eval(ctx context.Context, sc *redisscript.Script, tok any, args ...any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	src := sc.Source()
	var cmd []any
	switch {
	case strings.Contains(src, "struct.unpack('<dddddddd', ARGV[2])"):
		own, id, strs := evalArgs(src, args)
		n := s.nums(own[0], own[1], own[2], own[3], own[4])
		if id != "" {
			// The notify id is at a fixed place of length idLen (see
			// nums): a test's shorter one is padded with zeros.
			copy((*n)[numsLen:numsLen+idLen], strings.Repeat("0", idLen-len(id))+id)
		}
		cmd = s.command(tok, n, strs...)
	case strings.Contains(src, "struct.unpack('<ddddddd', ARGV[4])"):
		// 6be374c: ARGV[1..4] token, key TTL, channel prefix, seven
		// numbers (limit, key TTL, 1 to SPUBLISH, n4 .. n7), then the
		// acquire's weight and notify id or the renewal's weight and fence.
		own, id, strs := evalArgs(src, args)
		b := make(nums, 7*8)
		for i, v := range []int64{s.limit, s.keyTTL, int64(b2i(s.sharded)), own[0], own[1], own[2], own[3]} {
			b.set(i, v)
		}
		if id != "" {
			strs = []any{own[4], id}
		}
		cmd = append(append([]any(nil), s.cmdHead[:argTok]...), tok, s.keyTTL, s.chanPrefix, &b)
		cmd = append(cmd, strs...)
	default:
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

// evalArgs returns the numbers n4 .. n8 of a call of the packed script src
// (acquire.lua, release.lua or renew.lua) from a test's arguments (see eval),
// the notify id of an acquire ("" for the others), and the strings a
// renewal sends after its numbers (its weight and fence).
func evalArgs(src string, args []any) (own [5]int64, id string, strs []any) {
	switch {
	case strings.Contains(src, "\n-- acquire.lua: "):
		// lease, queue, heartbeat, deadline and weight; the notify id.
		var dl int64
		if len(args) > 5 {
			dl = num(args[5])
		}
		return [5]int64{num(args[1]), num(args[2]), num(args[3]), dl, num(args[0])}, args[4].(string), nil
	case strings.Contains(src, "\n-- release.lua: "):
		return [5]int64{num(args[0]), num(args[1]), num(args[2]), num(args[3])}, "", nil
	case strings.Contains(src, "\n-- renew.lua: "):
		// lease and mode packed; weight and fence as strings.
		return [5]int64{num(args[1]), num(args[3])}, "", []any{args[0], args[2]}
	}
	panic("eval: not a distsem script")
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
