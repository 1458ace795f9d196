package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseGoTestTime(t *testing.T) {
	out := []byte("ok  \tgithub.com/floodgate-go/floodgate/breaker\t1.2s\nok  \tgithub.com/floodgate-go/floodgate/floodgatetest\t14.736s\n")
	d, err := parseGoTestTime(out, "/floodgatetest")
	if err != nil || d != 14736*time.Millisecond {
		t.Fatalf("parseGoTestTime = %v, %v; want 14.736s", d, err)
	}
	for _, bad := range []string{
		"FAIL\tgithub.com/floodgate-go/floodgate/floodgatetest\t3.1s\n",
		"ok  \tgithub.com/floodgate-go/floodgate/floodgatetest\t(cached)\n",
		"",
	} {
		if d, err := parseGoTestTime([]byte(bad), "/floodgatetest"); err == nil {
			t.Errorf("parseGoTestTime(%q) = %v, nil; want an error", bad, d)
		}
	}
}

func TestKitTargetRow(t *testing.T) {
	for _, c := range []struct {
		k    kitSuite
		want string
	}{
		{kitSuite{took: 14700 * time.Millisecond, wall: 16 * time.Second}, "| 14.70s (`go test -count=1 ./floodgatetest/`"},
		{kitSuite{took: 61 * time.Second, wall: 62 * time.Second}, "| 61.00s"},
		{kitSuite{wall: 3 * time.Second, err: errors.New("boom")}, "the suite failed after 3.00s: boom"},
	} {
		var b strings.Builder
		writeTargets(&b, &report{p: fullParams, kit: &c.k})
		row := ""
		for l := range strings.Lines(b.String()) {
			if strings.Contains(l, "kit's own suite") {
				row = l
			}
		}
		met := c.k.err == nil && c.k.took < time.Minute
		if !strings.Contains(row, c.want) || strings.HasSuffix(strings.TrimSpace(row), "| met |") != met {
			t.Errorf("%+v: row %q, want it to hold %q and met = %v", c.k, row, c.want, met)
		}
	}
}

// TestRunSuite runs go test on a module of its own whose test checks the
// environment runSuite gives it, and then on one whose test fails.
func TestRunSuite(t *testing.T) {
	t.Setenv("REDIS_ADDR", "127.0.0.1:1") // must not reach the suite
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/kit\n\ngo 1.21\n")
	write("kit/kit_test.go", `package kit

import (
	"os"
	"testing"
)

func TestEnv(t *testing.T) {
	if v := os.Getenv("REDIS_ADDR"); v != "" {
		t.Errorf("REDIS_ADDR = %q, want unset", v)
	}
	if v := os.Getenv("REDIS_SERVER"); v != "/some/redis-server" {
		t.Errorf("REDIS_SERVER = %q", v)
	}
	if v := os.Getenv("FLOODGATE_REQUIRE_SERVERS"); v != "1" {
		t.Errorf("FLOODGATE_REQUIRE_SERVERS = %q", v)
	}
}
`)
	write("bad/bad_test.go", "package bad\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) { t.Fatal(\"this suite fails\") }\n")
	k := runSuite(t.Context(), root, "kit", "/some/redis-server")
	if k.err != nil || k.took <= 0 || k.took > k.wall {
		t.Fatalf("runSuite(kit) = %+v; want no error and 0 < took ≤ wall", k)
	}
	k = runSuite(t.Context(), root, "bad", "/some/redis-server")
	if k.err == nil || !strings.Contains(k.err.Error(), "this suite fails") {
		t.Fatalf("runSuite(bad) = %+v; want an error quoting the failure", k)
	}
}
