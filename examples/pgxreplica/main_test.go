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

	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/jackc/pgx/v5"
)

// TestCapHolds runs the example against DATABASE_URL while sampling
// pg_stat_activity: never more than the cap of report queries at once, in the
// database and in its own report.
func TestCapHolds(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		servertest.Missing(t, "DATABASE_URL is not set")
	}
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		servertest.Missing(t, "PostgreSQL unreachable: "+err.Error())
	}
	defer admin.Close(context.Background())

	const capN = 3
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
	var out bytes.Buffer
	err = run(t.Context(), config{URL: url, Cap: capN, Callers: 30, Query: 300 * time.Millisecond, Duration: 3 * time.Second}, &out)
	stop()
	wg.Wait()
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if samples < 10 {
		t.Fatalf("%d samples of pg_stat_activity, want at least 10", samples)
	}
	if maxSeen > capN || maxSeen < 1 {
		t.Errorf("pg_stat_activity showed %d report queries at once, want 1..%d", maxSeen, capN)
	}
	m := regexp.MustCompile(`reports: (\d+) done, (\d+) refused .* peak (\d+) / cap (\d+) in flight`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no reports line in the output")
	}
	done, _ := strconv.Atoi(m[1])
	refused, _ := strconv.Atoi(m[2])
	peak, _ := strconv.Atoi(m[3])
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

func TestUnreachable(t *testing.T) {
	err := run(t.Context(), config{URL: "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", Cap: 1, Callers: 1, Query: time.Millisecond, Duration: time.Second}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("run without PostgreSQL = %v, want a one-line unreachable error", err)
	}
}
