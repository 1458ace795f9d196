package shaperredis

import (
	"context"
	"errors"

	"github.com/floodgate-go/floodgate/shaper"
)

// The helpers in this file call the scripts at an explicit time, so that a
// Redis meter and its in-process twin can be fed the same times. They use
// testScripts: the production scripts assembled with pinnedClock instead of
// Redis TIME (see scripts.go; TestTestScriptsDifferOnlyInClock holds the two
// sets to the same text but for that piece). The production scripts take no
// time argument.
var testScripts = newScriptSet(pinnedClock)

// pinnedClock is the tests' clock piece: now is the argument after the
// script's own (an integer in [0, 2^53), shaper.ErrTimeRange's range), and
// keys get a TTL of at least an hour, as a pinned time is not Redis's.
func pinnedClock(nargs string) string {
	return "local now = tonumber(ARGV[" + nargs + " + 1])\n" +
		"if not now or now < 0 or now >= EXACT or now % 1 ~= 0 then\n" +
		"  return redis.error_reply('ERR shaper: time out of range')\n" +
		"end\n" +
		"local ttlfloor = 3600000\n"
}

// fillAt is evalBuf.fill with the time now (Unix µs) appended, for a script
// of testScripts.
func fillAt(buf *evalBuf, key string, rl *redisLimit, n, now int64) []any {
	return append(buf.fill(key, rl, n, 0), now)
}

// allowAt decides n for key on m at the time now (Unix µs), as AllowN does
// (same refusals before the round trip, same reply parsing), but straight on
// the client: no breaker, no batching.
func allowAt(ctx context.Context, m *Meter, key string, now, n int64) (shaper.Decision, error) {
	rl := m.lim.Load()
	if n > rl.max {
		return shaper.Decision{Limit: rl.lim}, tooLarge()
	}
	v, err := testScripts.meter[m.kind].EvalInts(ctx, m.st.Client, fillAt(new(evalBuf), m.Key(key), rl, n, now))
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
	err := evalKey(ctx, l.m.st.Client, testScripts.lease, l.m.Key(l.key), out[:], rl.arg, want, giveback, least, 0, now)
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
	err := evalKey(ctx, m.st.Client, testScripts.refund[m.kind], m.Key(key), out[:], rl.arg, n, getStamp(&d), now)
	return out[0] == 1, err
}
