package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kitSuite is one run of the kit's own tests (go test ./floodgatetest in
// the root module), as #24's target "the whole kit's own suite runs in
// under 60 s" is read: the time go test reports for the package, its test
// binary's run, on private redis-servers it starts (REDIS_ADDR unset,
// REDIS_SERVER set, FLOODGATE_REQUIRE_SERVERS=1 so that nothing skips).
type kitSuite struct {
	took, wall time.Duration // go test's figure; the command's, build included
	err        error         // the suite failed or could not be run
}

// kitPkg is the kit's package directory in the root module, and
// kitCommand the command runKitSuite runs, as the report names it.
const (
	kitPkg     = "floodgatetest"
	kitCommand = "go test -count=1 ./" + kitPkg + "/"
)

// runKitSuite runs the kit's suite from root, the repository's root module.
func runKitSuite(ctx context.Context, root, redisServer string) kitSuite {
	return runSuite(ctx, root, kitPkg, redisServer)
}

// runSuite runs go test ./pkg/ in the module at root.
func runSuite(ctx context.Context, root, pkg, redisServer string) kitSuite {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "./"+pkg+"/")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "REDIS_ADDR" && k != "REDIS_SERVER" && k != "FLOODGATE_REQUIRE_SERVERS" && k != "GOWORK" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "REDIS_SERVER="+redisServer, "FLOODGATE_REQUIRE_SERVERS=1", "GOWORK=off")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	k := kitSuite{wall: time.Since(start)}
	took, perr := parseGoTestTime(out, "/"+pkg)
	switch {
	case err != nil:
		k.err = fmt.Errorf("go test ./%s: %v: %s", pkg, err, lastLines(out, 5))
	case perr != nil:
		k.err = perr
	}
	k.took = took
	return k
}

// parseGoTestTime finds go test's "ok  <import path>\t<seconds>s" line for
// the package whose import path ends in suffix.
func parseGoTestTime(out []byte, suffix string) (time.Duration, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "ok" && strings.HasSuffix(f[1], suffix) {
			d, err := time.ParseDuration(f[2])
			if err != nil {
				return 0, fmt.Errorf("go test: line %q: %v", sc.Text(), err)
			}
			return d, nil
		}
	}
	return 0, fmt.Errorf("go test: no ok line for *%s in: %s", suffix, lastLines(out, 5))
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// repoRoot is the root module's directory: the parent of the bench module
// this program runs from.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, kitPkg, "doc.go")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no floodgatetest package above %s: run from the bench directory", wd)
		}
	}
}
