package shaperredis_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestBracedKeys: keys with braces, the empty key among them, are keys like
// any other: each has its own quota in Redis (a burst of 1 each: all are
// admitted once, then all denied), so no two of them share state.
func TestBracedKeys(t *testing.T) {
	db := redistest.Connect(t)
	// A call timeout that a loaded test machine does not reach: this test is
	// about keys, not outages.
	brk := breaker.New(db.Key("redis"), breaker.Config{CallTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1}, shaperredis.Config{Prefix: db.Key("m:"), Breaker: brk})
	keys := []string{"{6F9619FF-8B86-D011-B42D-00C04FC964FF}", "6F9619FF-8B86-D011-B42D-00C04FC964FF",
		"", "{", "}", "{}", "}{", "a}b", "{a", "a}", "}x", "{a}}", "{{a}"}
	ctx := t.Context()
	for _, pass := range []bool{true, false} {
		for _, k := range keys {
			d, err := m.AllowN(ctx, k, 1)
			if err != nil || d.Allowed != pass {
				t.Errorf("AllowN(%q) on pass allowed=%v: %+v, %v", k, pass, d, err)
			}
		}
	}
}

// TestCheckKey: CheckKey says, without I/O, which keys AllowN refuses with
// ErrInvalidKey: those longer than MaxKeyLen, and no other.
func TestCheckKey(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(10)}
	m := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{MaxKeyLen: 4})
	for key, valid := range map[string]bool{"": true, "{}{}": true, "1234": true, "12345": false} {
		if err := m.CheckKey(key); (err == nil) != valid || !valid && err != shaperredis.ErrInvalidKey {
			t.Errorf("CheckKey(%q) = %v, want valid %v", key, err, valid)
		}
		if !valid {
			if _, err := m.AllowN(context.Background(), key, 1); err != shaperredis.ErrInvalidKey {
				t.Errorf("AllowN(%q) = %v, want ErrInvalidKey as CheckKey says", key, err)
			}
		}
	}
	unbounded := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{MaxKeyLen: -1})
	if err := unbounded.CheckKey(strings.Repeat("k", 1<<20)); err != nil {
		t.Errorf("CheckKey(1 MB) with MaxKeyLen -1 = %v, want nil", err)
	}
}

// TestQueueNamesWithBraces: a Queue's name may hold braces; its one Redis
// key is Prefix + "{" + name + "}", so different names have different keys.
func TestQueueNamesWithBraces(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"q", "{q}", "{q", "q}", "}q{", "{", "}"} {
		q := shaperredis.NewQueue(deadClient(), name, shaper.PerSecond(1), shaperredis.QueueConfig{}, shaperredis.Config{})
		k := q.Key()
		q.Close()
		if o, dup := seen[k]; dup {
			t.Errorf("queues %q and %q share the Redis key %q", o, name, k)
		}
		seen[k] = name
	}
}
