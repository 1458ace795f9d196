package distsem

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// packState is unpackState's inverse.
func packState(st [len(stateFields)]int64) string {
	b := make([]byte, 0, packedStateLen)
	for _, v := range st {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
	}
	return string(b)
}

// readS returns the state stored in the hash key as text fields, whatever
// its format: a packed state decoded (seq 0, none, left out) with "packed" =
// "1", and every other field of the hash as stored (prefixed "raw:" beside a
// packed state, so that a text field left over shows).
func readS(tb testing.TB, c redis.Cmdable, key string) map[string]string {
	tb.Helper()
	h, err := c.HGetAll(context.Background(), key).Result()
	if err != nil {
		tb.Fatalf("HGETALL %s: %v", key, err)
	}
	return decodeS(h)
}

// decodeS is readS on a hash already read.
func decodeS(h map[string]string) map[string]string {
	st, ok := unpackState(h["p"])
	if !ok {
		return h
	}
	out := map[string]string{"packed": "1"}
	for i, f := range stateFields {
		if f != "seq" || st[i] != 0 {
			out[f] = strconv.FormatInt(st[i], 10)
		}
	}
	for f, v := range h {
		if f != "p" {
			out["raw:"+f] = v
		}
	}
	return out
}

// setS sets value f of the state in key to v, in the format it is stored in
// (text when not packed). Without a state (the hash is gone) it does
// nothing: a value alone would be a key without a TTL, which no script leaves.
func setS(tb testing.TB, c redis.Cmdable, key, f string, v int64) {
	tb.Helper()
	ctx := context.Background()
	if n, err := c.Exists(ctx, key).Result(); err != nil || n == 0 {
		return
	}
	p, _ := c.HGet(ctx, key, "p").Result()
	st, ok := unpackState(p)
	if !ok {
		if err := c.HSet(ctx, key, f, v).Err(); err != nil {
			tb.Fatal(err)
		}
		return
	}
	st[slices.Index(stateFields[:], f)] = v
	if err := c.HSet(ctx, key, "p", packState(st)).Err(); err != nil {
		tb.Fatal(err)
	}
}

// delS deletes value f of the state in key: its text field; in a packed
// state seq is set to 0 (none) and any other value loses the state whole
// (HDEL p), as a packed state can only be lost whole.
func delS(tb testing.TB, c redis.Cmdable, key, f string) {
	tb.Helper()
	ctx := context.Background()
	p, _ := c.HGet(ctx, key, "p").Result()
	if _, ok := unpackState(p); ok {
		if f == "seq" {
			setS(tb, c, key, f, 0)
			return
		}
		f = "p"
	}
	if err := c.HDel(ctx, key, f).Err(); err != nil {
		tb.Fatal(err)
	}
}

// withFormat returns src, an assembled script, writing the state packed or
// as text fields (see PACKED in head.lua).
func withFormat(tb testing.TB, src string, packed bool) string {
	tb.Helper()
	var out string
	for _, from := range []string{"local PACKED = false\n", "local PACKED = true\n"} {
		if strings.Count(src, from) == 1 {
			out = strings.Replace(src, from, "local PACKED = "+strconv.FormatBool(packed)+"\n", 1)
		}
	}
	if out == "" {
		tb.Fatal("no PACKED line in a script")
	}
	return out
}

// formatScripts returns the scripts (acquire, release, renew) as built but
// writing the state packed or as text.
func formatScripts(tb testing.TB, packed bool) [3]*redisscript.Script {
	tb.Helper()
	var out [3]*redisscript.Script
	for i, sc := range []*redisscript.Script{acquireScript, releaseScript, renewScript} {
		out[i] = redisscript.NewPacked(withFormat(tb, assembleSource(sc), packed))
	}
	return out
}

// formats are the two formats of the state, by name, for subtests.
var formats = []struct {
	name   string
	packed bool
}{{"packed", true}, {"text", false}}

func TestUnpackState(t *testing.T) {
	want := [len(stateFields)]int64{3, 2, 1795978983896001, 0, -1, 1795978983896, 1795978984896, 7}
	got, ok := unpackState(packState(want))
	if !ok || got != want {
		t.Fatalf("unpackState(packState(%v)) = %v, %v", want, got, ok)
	}
	for _, p := range []string{"", "3", packState(want)[1:], packState(want) + "x"} {
		if _, ok := unpackState(p); ok {
			t.Errorf("unpackState(%d bytes) ok, want not", len(p))
		}
	}
	if l, u := stateLimitUsed([]any{packState(want), "9", "9"}); l != 3 || u != 2 {
		t.Errorf("stateLimitUsed(packed) = %d, %d, want 3, 2", l, u)
	}
	if l, u := stateLimitUsed([]any{nil, "4", "1"}); l != 4 || u != 1 {
		t.Errorf("stateLimitUsed(text) = %d, %d, want 4, 1", l, u)
	}
}

// TestNaNLeaseBoundTakesGeneralPath: a stored he (the lower bound of the
// earliest lease) that is NaN, a corrupt state, keeps the fast paths off, as
// a comparison with NaN is false: the acquire goes the general path, whose
// reap reads the holders and writes an exact he back. (head.lua's fast
// interval once let it through, and the fast acquire wrote the NaN back.)
func TestNaNLeaseBoundTakesGeneralPath(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	s := New(db.Client, db.Prefix+"sem", 4, Config{})
	defer s.Close()
	p, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	he := slices.Index(stateFields[:], "he")
	raw, err := db.Client.HGet(ctx, s.keys[0], "p").Result()
	if err != nil || len(raw) != packedStateLen {
		t.Fatalf("HGET p = %d bytes, %v; want a packed state", len(raw), err)
	}
	b := []byte(raw)
	binary.LittleEndian.PutUint64(b[8*he:], math.Float64bits(math.NaN()))
	if err := db.Client.HSet(ctx, s.keys[0], "p", string(b)).Err(); err != nil {
		t.Fatal(err)
	}
	q, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release(ctx)
	raw, err = db.Client.HGet(ctx, s.keys[0], "p").Result()
	if err != nil || len(raw) != packedStateLen {
		t.Fatalf("HGET p = %d bytes, %v; want a packed state", len(raw), err)
	}
	got := math.Float64frombits(binary.LittleEndian.Uint64([]byte(raw[8*he:])))
	if math.IsNaN(got) {
		t.Fatal("he is still NaN after an acquire: a fast path took the corrupt state")
	}
	if lo := float64(time.Now().UnixMilli()); got < lo {
		t.Errorf("he = %v after an acquire with two leases held, want a lease expiry (≥ now, %v)", got, lo)
	}
}
