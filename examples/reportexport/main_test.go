package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// serve runs the server in the background until the test ends.
func serve(t *testing.T, cfg config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var log bytes.Buffer
	go func() { errc <- run(ctx, cfg, &log, func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run after shutdown = %v, want nil (clean shutdown)", err)
		}
		if !strings.Contains(log.String(), "shutting down") {
			t.Errorf("log %q does not mention the shutdown", log.String())
		}
	})
	return "http://" + addr
}

func do(t *testing.T, method, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// checkQuota sends 3 exports at once for one tenant: 2 run at once and the
// third is refused at once (429, never queued: the README's MaxWait -1).
// Then exports one after the other pass until the 5/min rate is spent; the
// next gets 429 with Retry-After and the JSON body.
func checkQuota(t *testing.T, base string, render time.Duration) {
	codes := map[int]int{}
	var mu sync.Mutex
	var sample *http.Response
	var sampleBody []byte
	var wg sync.WaitGroup
	start := time.Now()
	for range 3 {
		wg.Go(func() {
			resp, body := do(t, "POST", base+"/reports/export-pdf", "demo-free")
			mu.Lock()
			defer mu.Unlock()
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				sample, sampleBody = resp, body
			}
		})
	}
	wg.Wait()
	if codes[200] != 2 || codes[429] != 1 {
		t.Errorf("3 concurrent exports of one tenant got %v, want 2×200 and 1×429 (2 at once, never queued)", codes)
	}
	if el := time.Since(start); el > 2*render {
		t.Errorf("3 exports of %v at once took %v: one was queued", render, el)
	}
	passed := codes[200]
	for range 5 {
		resp, body := do(t, "POST", base+"/reports/export-pdf", "demo-free")
		if resp.StatusCode != 200 {
			if resp.StatusCode == 429 {
				sample, sampleBody = resp, body
			}
			break
		}
		passed++
	}
	if passed != exportPerMin {
		t.Errorf("%d exports passed in all, want %d (5/min; a refused one spends no quota)", passed, exportPerMin)
	}
	if sample == nil {
		t.Fatal("no 429")
	}
	ra, err := strconv.Atoi(sample.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds ≥ 1", sample.Header.Get("Retry-After"))
	}
	var b map[string]any
	if err := json.Unmarshal(sampleBody, &b); err != nil {
		t.Fatalf("429 body %q: %v", sampleBody, err)
	}
	for _, k := range []string{"error", "message", "retry_after_seconds"} {
		if _, ok := b[k]; !ok {
			t.Errorf("429 body %s has no %q", sampleBody, k)
		}
	}
	if resp, body := do(t, "POST", base+"/reports/export-pdf", "demo-free"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("export after the quota: %d %s, want 429 with Retry-After", resp.StatusCode, body)
	}
	// The other tenant has its own quota, and GET /items is not the export's.
	if resp, body := do(t, "POST", base+"/reports/export-pdf", "demo-gold"); resp.StatusCode != 200 {
		t.Errorf("other tenant's export: %d %s, want 200", resp.StatusCode, body)
	}
	if resp, body := do(t, "GET", base+"/items", "demo-free"); resp.StatusCode != 200 {
		t.Errorf("GET /items: %d %s, want 200", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", base+"/items", ""); resp.StatusCode != 401 {
		t.Errorf("GET /items without a key: %d, want 401", resp.StatusCode)
	}
}

// TestRedisDownStaysAvailable stops Redis under a running server: requests
// are still served (no 503 for everything), each limit now enforced by this
// process's share of it (FailLocal), as the example's README says.
func TestRedisDownStaysAvailable(t *testing.T) {
	srv := redistest.Start(t)
	base := serve(t, config{Addr: "127.0.0.1:0", Redis: srv.Addr, Prefix: "reportexport-down:", Export: 10 * time.Millisecond, Pods: 2})
	if resp, body := do(t, "GET", base+"/items", "demo-free"); resp.StatusCode != 200 {
		t.Fatalf("GET /items with Redis up: %d %s", resp.StatusCode, body)
	}
	srv.Kill()
	for i := range 3 {
		if resp, body := do(t, "GET", base+"/items", "demo-free"); resp.StatusCode != 200 {
			t.Errorf("GET /items %d with Redis down: %d %s, want 200 (a local share, not 503)", i+1, resp.StatusCode, body)
		}
	}
	// Exports: this process's share of 5/min among 2 pods passes, then 429;
	// never 503.
	codes := map[int]int{}
	for range exportPerMin + 1 {
		resp, _ := do(t, "POST", base+"/reports/export-pdf", "demo-gold")
		codes[resp.StatusCode]++
	}
	if codes[200] < 1 || codes[429] < 1 || codes[200]+codes[429] != exportPerMin+1 {
		t.Errorf("%d exports with Redis down got %v, want some 200 (this process's share) then 429, no 503", exportPerMin+1, codes)
	}
}

func TestReportExportLocal(t *testing.T) {
	checkQuota(t, serve(t, config{Addr: "127.0.0.1:0", Export: 300 * time.Millisecond}), 300*time.Millisecond)
}

func TestReportExportRedis(t *testing.T) {
	db := redistest.Connect(t)
	cfg := config{Addr: "127.0.0.1:0", Redis: db.Client.Options().Addr, Prefix: db.Prefix, Export: 300 * time.Millisecond}
	// Two servers sharing the limits through Redis, as two pods would.
	a, b := serve(t, cfg), serve(t, cfg)
	checkQuota(t, a, cfg.Export)
	if resp, _ := do(t, "POST", b+"/reports/export-pdf", "demo-free"); resp.StatusCode != 429 {
		t.Errorf("export on the second server after the quota: %d, want 429 (shared limit)", resp.StatusCode)
	}
}

func TestReportExportRedisUnreachable(t *testing.T) {
	err := run(t.Context(), config{Addr: "127.0.0.1:0", Redis: "127.0.0.1:1", Prefix: "x:"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("run with a dead Redis = %v, want a one-line unreachable error", err)
	}
}
