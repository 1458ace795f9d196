package examplekit

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPublicDocsSayWhatTheyMean: the public docs (package doc comments and
// the Markdown files, benchmarks' internals aside) never speak of "the seed",
// a document users have never seen; they say what is meant.
func TestPublicDocsSayWhatTheyMean(t *testing.T) {
	root := "../../.."
	word := regexp.MustCompile(`(?i)\bseed\b`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "bench" || d.Name() == "testdata" || d.Name() == "internal" && rel == "internal" {
				return filepath.SkipDir
			}
			return nil
		}
		isMD := strings.HasSuffix(path, ".md")
		isGo := strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")
		if !isMD && !isGo {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if isGo && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // code (maphash.Seed and the like), not docs
			}
			if word.MatchString(line) {
				t.Errorf("%s:%d speaks of the seed: %s", rel, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
