package distsem_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// patientConfig is a Config whose breaker's call timeout a loaded test
// machine does not reach: these tests are about names, not outages.
func patientConfig(name string) distsem.Config {
	brk := breaker.New(name, breaker.Config{CallTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	return distsem.Config{Breaker: brk, WaiterTTL: 6 * time.Second}
}

// bracedKeys are keys with braces in every position, the escape sequences
// themselves among them (so that an escape that is not injective shows).
var bracedKeys = []string{
	"{6F9619FF-8B86-D011-B42D-00C04FC964FF}",
	"6F9619FF-8B86-D011-B42D-00C04FC964FF",
	"{", "}", "{}", "}{", "{{", "}}", "a}b", "a{b", "{a", "a}", "}x", "x{",
	"{(", "{)", "(", ")", "{(}", "{)}", "{{(", "({", "){", "\x00{", "{\xff}",
}

// slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag
// (the bytes between the first '{' and the first '}' after it, if not
// empty) or of the whole key, modulo 16384.
func slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// TestSlotOfKnownKeys: the test's slot function gives CRC16's check value
// and reads hash tags as Redis does (TestClusterBracedKeys compares it with
// a real cluster's CLUSTER KEYSLOT too).
func TestSlotOfKnownKeys(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":            0x31C3 % 16384, // the CRC16/XMODEM check value
		"{user1000}.following": slot("user1000"),
		"foo{}{bar}":           8363, // empty first tag: the whole key (CRC16 of "foo{}{bar}" mod 16384)
		"foo{{bar}}zap":        slot("{bar"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestNamesWithBracesMapInjectively: a Semaphore may have any non-empty
// name. All the Redis keys of one name are in one hash slot (one script
// never crosses slots on Cluster); two different names never share a key;
// and a name without braces keeps the keys it always had, "{name}:...", so
// processes of the previous release share its state.
func TestNamesWithBracesMapInjectively(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // no I/O
	t.Cleanup(func() { rdb.Close() })
	names := append([]string{"export:acme", "a", "x:y:z"}, bracedKeys...)
	for _, p := range []string{"p:", "p{:", "}p:"} {
		for _, k := range bracedKeys[:8] {
			names = append(names, p+k)
		}
	}
	owner := map[string]string{}
	for _, name := range names {
		s := distsem.New(rdb, name, 1, distsem.Config{})
		keys := s.Keys()
		s.Close()
		for _, k := range keys {
			if slot(k) != slot(keys[0]) {
				t.Errorf("name %q: key %q in slot %d, key %q in slot %d", name, k, slot(k), keys[0], slot(keys[0]))
			}
			if o, dup := owner[k]; dup && o != name {
				t.Errorf("names %q and %q share the Redis key %q", o, name, k)
			}
			owner[k] = name
		}
		if !strings.ContainsAny(name, "{}") {
			for _, k := range keys {
				if !strings.HasPrefix(k, "{"+name+"}:") {
					t.Errorf("name %q without braces: key %q, want it under {%s} as before", name, k, name)
				}
			}
		}
	}
}

// TestKeyedBracedKeys: a Keyed takes keys with braces as it takes any
// other: each key has its own limit in Redis (limit 1 each: all are held at
// once, and a second call for any of them finds no capacity), and the
// state of a key is the state of the Semaphore named prefix + key.
func TestKeyedBracedKeys(t *testing.T) {
	db := redistest.Connect(t)
	k := newKeyed(t, db.Client, db.Key("t:"), 1, distsem.KeyedConfig{Config: patientConfig(t.Name())})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var held []*distsem.Permit
	for _, key := range bracedKeys {
		p, err := k.TryAcquire(ctx, key, 1)
		if err != nil {
			t.Fatalf("TryAcquire(%q) with the other keys held: %v, want a permit (keys share no state)", key, err)
		}
		held = append(held, p)
	}
	for _, key := range bracedKeys {
		if _, err := k.TryAcquire(ctx, key, 1); !errors.Is(err, distsem.ErrNoCapacity) {
			t.Errorf("second TryAcquire(%q): %v, want ErrNoCapacity", key, err)
		}
		if st := keyStats(t, db.Client, db.Key("t:"), key); st.InUse != 1 {
			t.Errorf("Semaphore named prefix + %q: InUse %d, want 1 (the Keyed's permit)", key, st.InUse)
		}
	}
	for _, p := range held {
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
}

// TestKeyedCheckKey: CheckKey reports, without I/O, what Acquire would
// refuse as ErrInvalidKey: the empty key and keys longer than MaxNameLen; any
// other byte string, braces included, is a valid key.
func TestKeyedCheckKey(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // no I/O
	t.Cleanup(func() { rdb.Close() })
	k := distsem.NewKeyed(rdb, "p{}:", 1, distsem.KeyedConfig{Config: distsem.Config{MaxNameLen: 8}})
	t.Cleanup(func() { k.Close() })
	for key, valid := range map[string]bool{"": false, "123456789": false, "12345678": true, "{}{}{}{}": true, "\x00\xff": true} {
		err := k.CheckKey(key)
		if got := err == nil; got != valid {
			t.Errorf("CheckKey(%q) = %v, want valid %v", key, err, valid)
		}
		if !valid {
			if !errors.Is(err, distsem.ErrInvalidKey) {
				t.Errorf("CheckKey(%q) = %v, want ErrInvalidKey", key, err)
			}
			if _, aerr := k.TryAcquire(t.Context(), key, 1); !errors.Is(aerr, distsem.ErrInvalidKey) {
				t.Errorf("TryAcquire(%q) = %v, want ErrInvalidKey as CheckKey says", key, aerr)
			}
		}
	}
}

// TestClusterBracedKeys: on a real 3-node Redis Cluster, keys with braces
// (among them "}x", whose naive tag "{}x}" would be empty and spread the
// key's Redis keys over slots) are acquired and released without a
// CROSSSLOT error, and Redis puts all the Redis keys of each in one slot.
func TestClusterBracedKeys(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	k := newKeyed(t, c.Client, "t{:", 1, distsem.KeyedConfig{Config: patientConfig(t.Name())})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, key := range bracedKeys {
		s := distsem.New(c.Client, "t{:"+key, 1, distsem.Config{})
		for _, rk := range s.Keys() {
			got, err := c.Client.ClusterKeySlot(ctx, rk).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got != int64(slot(s.Keys()[0])) {
				t.Errorf("CLUSTER KEYSLOT %q = %d; slot(%q) = %d", rk, got, s.Keys()[0], slot(s.Keys()[0]))
			}
		}
		s.Close()
		p, err := k.Acquire(ctx, key, 1)
		if err != nil {
			t.Errorf("Acquire(%q) on Cluster: %v", key, err)
			continue
		}
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release(%q) on Cluster: %v", key, err)
		}
	}
}
