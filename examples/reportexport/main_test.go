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

// checkQuota sends 7 exports at once for one tenant: the first five pass the
// 5/min rate and run 2 at once (so they take at least 3 renders), the other
// two get 429 with Retry-After and the JSON body; so does the next one.
func checkQuota(t *testing.T, base string, render time.Duration) {
	codes := map[int]int{}
	var mu sync.Mutex
	var sample *http.Response
	var sampleBody []byte
	var wg sync.WaitGroup
	start := time.Now()
	for range 7 {
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
	if codes[200] != 5 || codes[429] != 2 {
		t.Errorf("7 concurrent exports of one tenant got %v, want 5×200 and 2×429", codes)
	}
	if el := time.Since(start); el < 3*render-50*time.Millisecond {
		t.Errorf("5 exports of %v took %v: more than 2 ran at once", render, el)
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
