package shaperredis

import (
	"context"
	"errors"

	"github.com/floodgate-go/floodgate/shaper"
)

// The helpers in this file call the scripts at an explicit time, through the
// scripts' test-only time argument (see lua/common.lua), so that a Redis meter
// and its in-process twin can be fed the same times. Production code never
// passes a time: no field or parameter of a production type carries one.

// fillAt is evalBuf.fill with the time now (Unix µs) appended.
func fillAt(buf *evalBuf, key string, rl *redisLimit, n, now int64) []any {
	args := buf.fill(key, rl, n, 0)
	buf.now = now
	buf.args[9] = &buf.now
	return args[:10]
}

// allowAt decides n for key on m at the time now (Unix µs), as AllowN does
// (same refusals before the round trip, same reply parsing), but straight on
// the client: no breaker, no batching.
func allowAt(ctx context.Context, m *Meter, key string, now, n int64) (shaper.Decision, error) {
	rl := m.lim.Load()
	if n > rl.max {
		return shaper.Decision{Limit: rl.lim}, tooLarge()
	}
	v, err := m.script.EvalInts(ctx, m.st.Client, fillAt(new(evalBuf), m.Key(key), rl, n, now))
	if err != nil {
		return shaper.Decision{}, err
	}
	return decision(v, rl)
}

// leaseAt runs lease.lua for l at the time now (Unix µs), as Lease.leaseCall
// does.
func leaseAt(ctx context.Context, l *Lease, now, want, least, giveback int64) ([4]int64, error) {
	rl := l.m.lim.Load()
	want = min(want, rl.max)
	var out [4]int64
	err := evalKey(ctx, l.m.st.Client, leaseScript, l.m.Key(l.key), out[:], rl.args[0], rl.args[1], rl.args[2], want, giveback, least, 0, now)
	if err == nil && (out[0] < 0 || out[0] > want || out[2] < 0) {
		err = errors.New("shaperredis: unexpected lease reply")
	}
	return out, err
}

// refundAt runs m's refund script for key at the time now (Unix µs), as
// Refund does but straight on the client, and reports whether it gave
// anything back.
func refundAt(ctx context.Context, m *Meter, key string, now, n int64, d shaper.Decision) (bool, error) {
	rl := m.lim.Load()
	var out [1]int64
	err := evalKey(ctx, m.st.Client, kinds[m.kind].refund, m.Key(key), out[:], rl.args[0], rl.args[1], rl.args[2], n, getStamp(&d), now)
	return out[0] == 1, err
}
