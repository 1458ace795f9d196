package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/jackc/pgx/v5"
)

// TestCapHolds runs the example against DATABASE_URL while sampling
// pg_stat_activity: never more than the cap of report queries at once, in the
// database and in its own report.
func TestCapHolds(t *testing.T) {
	url, admin := connectAdmin(t)
	var err error

	const capN = 3
	var out bytes.Buffer
	maxSeen := sampleReports(t, admin, func() {
		err = run(t.Context(), config{URL: url, Cap: capN, Callers: 30, Query: 300 * time.Millisecond, Duration: 3 * time.Second}, &out)
	})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if maxSeen > capN || maxSeen < 1 {
		t.Errorf("pg_stat_activity showed %d report queries at once, want 1..%d", maxSeen, capN)
	}
	done, refused, peak := reportsLine(t, out.String())
	if peak > capN || peak < 1 {
		t.Errorf("reported peak %d, want 1..%d", peak, capN)
	}
	// 3 at once × 300ms over 3s (and up to 2s of waiters after): 30 to 50
	// reports; 30 callers want far more, so some wait 2s and are refused.
	if done < 15 || done > 3*(3000+2000)/300+capN {
		t.Errorf("%d reports done, want 30 to 50", done)
	}
	if refused < 1 {
		t.Errorf("no report refused with 30 callers on a cap of 3")
	}
	if !strings.Contains(out.String(), "cheap:") {
		t.Error("no cheap line")
	}
}

// sampleReports runs f while sampling pg_stat_activity, and returns the most
// report queries seen running at once.
func sampleReports(t *testing.T, admin *pgx.Conn, f func()) int {
	t.Helper()
	sctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var maxSeen, samples int
	wg.Go(func() {
		for sctx.Err() == nil {
			var n int
			if err := admin.QueryRow(sctx, `SELECT count(*) FROM pg_stat_activity
				WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, Marker).Scan(&n); err != nil {
				return
			}
			samples++
			maxSeen = max(maxSeen, n)
			time.Sleep(10 * time.Millisecond)
		}
	})
	f()
	stop()
	wg.Wait()
	if samples < 10 {
		t.Fatalf("%d samples of pg_stat_activity, want at least 10", samples)
	}
	return maxSeen
}

var reportsRE = regexp.MustCompile(`reports: (\d+) done, (\d+) refused .* peak (\d+) / cap (\d+) in flight`)

// reportsLine reads the example's "reports:" line.
func reportsLine(t *testing.T, out string) (done, refused, peak int) {
	t.Helper()
	m := reportsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no reports line in the output:\n%s", out)
	}
	done, _ = strconv.Atoi(m[1])
	refused, _ = strconv.Atoi(m[2])
	peak, _ = strconv.Atoi(m[3])
	return done, refused, peak
}

func connectAdmin(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		servertest.Missing(t, "DATABASE_URL is not set")
	}
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		servertest.Missing(t, "PostgreSQL unreachable: "+err.Error())
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return url, admin
}

// TestRefusedCallersComeBackLater runs 30 callers on a cap of 3: most are
// refused, and each refused caller comes back after the refusal's RetryAfter,
// as a client answered 503 would, instead of asking again at once (which made
// over a million refusals in 5s).
func TestRefusedCallersComeBackLater(t *testing.T) {
	url, _ := connectAdmin(t)
	var out bytes.Buffer
	const callers, d = 30, 3 * time.Second
	if err := run(t.Context(), config{URL: url, Cap: 3, Callers: callers, Query: 300 * time.Millisecond, Duration: d}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("output:\n%s", out.String())
	_, refused, _ := reportsLine(t, out.String())
	// A RetryAfter is at least 100ms here (the estimate of a queue of 3 ×
	// 300ms queries): at most one refusal per caller per 100ms.
	if most := callers * int(d/(100*time.Millisecond)); refused > most || refused < 1 {
		t.Errorf("%d refusals by %d callers in %v, want 1..%d: refused callers must wait their RetryAfter", refused, callers, d, most)
	}
}

// TestFleetCapHolds runs two processes' worth of the example (two pools, two
// Redis clients) sharing one cap of 3 through Redis, as the README's job 1
// does across pods: PostgreSQL never sees more than 3 report queries at once.
func TestFleetCapHolds(t *testing.T) {
	url, admin := connectAdmin(t)
	rdb := redistest.Connect(t)
	const capN = 3
	cfg := config{URL: url, Cap: capN, Callers: 10, Query: 300 * time.Millisecond, Duration: 3 * time.Second,
		Redis: rdb.Client.Options().Addr, Name: rdb.Prefix + "replica-reports", Share: 1}
	var outs [2]bytes.Buffer
	var errs [2]error
	maxSeen := sampleReports(t, admin, func() {
		var wg sync.WaitGroup
		for i := range outs {
			wg.Go(func() { errs[i] = run(t.Context(), cfg, &outs[i]) })
		}
		wg.Wait()
	})
	sum := 0
	for i := range outs {
		t.Logf("process %d:\n%s", i+1, outs[i].String())
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i+1, errs[i])
		}
		if !strings.Contains(outs[i].String(), "fleet-wide through Redis") {
			t.Errorf("process %d does not say the cap is fleet-wide", i+1)
		}
		done, _, _ := reportsLine(t, outs[i].String())
		sum += done
	}
	if maxSeen > capN || maxSeen < 1 {
		t.Errorf("pg_stat_activity showed %d report queries of the two processes at once, want 1..%d (one cap for both)", maxSeen, capN)
	}
	// One cap of 3 × 300ms over 3s (and waiters up to 2s after): at most
	// 3*(3000+2000)/300+3 = 53 between them; two caller sets would do twice.
	if most := capN*(3000+2000)/300 + capN; sum > most || sum < 10 {
		t.Errorf("the two processes did %d reports, want 10..%d", sum, most)
	}
}

func TestUnreachable(t *testing.T) {
	err := run(t.Context(), config{URL: "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", Cap: 1, Callers: 1, Query: time.Millisecond, Duration: time.Second}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("run without PostgreSQL = %v, want a one-line unreachable error", err)
	}
}
