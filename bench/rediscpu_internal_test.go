package bench

import (
	"context"
	"math"
	"testing"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestUsecOnce(t *testing.T) {
	before := redistest.ParseCommandStats("# Commandstats\r\n" +
		"cmdstat_get:calls=10,usec=10,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n")
	// 100 EVALs, each calling TIME, GET and SET; 50 GETs of the client's own.
	after := redistest.ParseCommandStats("# Commandstats\r\n" +
		"cmdstat_get:calls=160,usec=160,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_time:calls=100,usec=200,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=100,usec=150,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=100,usec=1400,usec_per_call=14.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=100,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n")
	if got := after["evalsha"]; got != (redistest.CmdStat{Calls: 100, Usec: 1400}) {
		t.Fatalf("parsed evalsha = %+v, want {100 1400}", got)
	}
	for _, c := range []struct {
		name   string
		direct map[string]int64
		want   float64
	}{
		// The scripts' usec alone: their inner commands are in it.
		{"scripts only", map[string]int64{"evalsha": 100}, 1400},
		// The client's own 50 of the 150 GETs: 50 µs of get's 150.
		{"own GETs", map[string]int64{"evalsha": 100, "get": 50}, 1450},
		// More sent than Redis counted (a command sent to another server):
		// at most the whole line.
		{"capped", map[string]int64{"get": 500}, 1400 + 150},
		{"subcommand", map[string]int64{"client": 2}, 1404},
	} {
		if got := usecOnce(before, after, c.direct); got != c.want {
			t.Errorf("%s: usecOnce = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRedisCPUOnce runs a GCRA-shaped script (TIME, GET, SET) on a private
// redis-server, beside GETs of the client's own, and checks that the window
// counts the script's usec once and the client's GETs in their share.
func TestRedisCPUOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(redistest.Options(srv.Addr))
	defer rdb.Close()
	ctx := context.Background()
	sc := redis.NewScript(`redis.call('TIME'); redis.call('GET', KEYS[1]); redis.call('SET', KEYS[1], 'x', 'PX', 60000); return 1`)
	if err := sc.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	w := redisCPUOnce(t, rdb)
	raw0 := redistest.CommandStats(t, rdb)
	const scripts, gets = 200, 100
	for range scripts {
		if err := sc.EvalSha(ctx, rdb, []string{"k"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range gets {
		rdb.Get(ctx, "k")
	}
	raw1 := redistest.CommandStats(t, rdb)
	got := w.usec(t)

	d := func(name string) redistest.CmdStat {
		return redistest.CmdStat{Calls: raw1[name].Calls - raw0[name].Calls, Usec: raw1[name].Usec - raw0[name].Usec}
	}
	if c := d("evalsha").Calls; c != scripts {
		t.Fatalf("evalsha calls in the window = %d, want %d", c, scripts)
	}
	if c := d("get").Calls; c != scripts+gets {
		t.Fatalf("get calls in the window = %d, want %d (Redis counts a script's GETs on cmdstat_get too)", c, scripts+gets)
	}
	// Within the window w measured (it began before raw0 and ended after
	// raw1, which adds only INFO calls).
	want := float64(d("evalsha").Usec) + float64(d("get").Usec)*gets/(scripts+gets)
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("usec = %v, want evalsha's %d + a third of get's %d = %v", got, d("evalsha").Usec, d("get").Usec, want)
	}
	sumAll := float64(d("evalsha").Usec + d("get").Usec + d("time").Usec + d("set").Usec)
	if got >= sumAll {
		t.Errorf("usec = %v, not below the sum of every line %v: the script's inner commands were counted again", got, sumAll)
	}
}
