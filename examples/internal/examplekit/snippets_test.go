package examplekit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	// What the README's gRPC snippet imports, so that go.mod keeps them.
	_ "github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	_ "google.golang.org/grpc/credentials/insecure"
)

// snippetPrelude declares what the README's snippets use without declaring
// it: the reader's own pool, Redis address, context, messages and handlers.
const snippetPrelude = `package readmesnippets

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	_ = adaptive.New
	_ = backoff.New
	_ = errors.Is
	_ = breaker.FailLocal
	_ = bulkhead.New
	_ = bulkheadpgx.New
	_ = bulkheadgrpc.UnaryServerInterceptor
	_ = grpc.NewServer
	_ = insecure.NewCredentials
	_ = distsem.New
	_ = floodgatetest.StartProxy
	_ = synctest.Test
	_ = shaper.PerSecond
	_ = shaperredis.NewMeter
	_ = time.Second
	_ = http.ListenAndServe
	_ = redis.NewClient
)

var (
	addr, reportSQL, tenant string
	pool                    *pgxpool.Pool
	ctx, drainCtx           context.Context
	rdb                     *redis.Client
	mux                     *http.ServeMux
	messages                chan Message
	renderers               floodgate.Gate
	b                       *bulkhead.Bulkhead
	target                  string
	authUnary               grpc.UnaryServerInterceptor
	authStream              grpc.StreamServerInterceptor
	t                       *testing.T // the test a testing section's snippet runs in
)

type Message struct{}

func (Message) Nack(error) {}

func exportJob(Message) func(context.Context) error { return nil }

func auth(h http.Handler) http.Handler { return h }

func isOverload(error) bool { return false }

func classOf(bulkhead.Identity, bulkhead.Request) string { return "" }

func callOverGRPC(context.Context) error { return nil }
`

// TestREADMESnippetsCompile compiles every Go snippet of README.md, each
// as the body of a function, against the modules as they are: a renamed
// type, field or constructor fails here, not in a reader's editor.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's snippets")
	}
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```\n").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d Go snippets, want the three jobs' at least", len(blocks))
	}
	decl := regexp.MustCompile(`(?m)^(\w+(?:, \w+)*) :=`)
	var src strings.Builder
	src.WriteString(snippetPrelude)
	for i, m := range blocks {
		fmt.Fprintf(&src, "\nfunc snippet%d() {\n%s", i+1, m[1])
		// Use what the snippet declares, as the rest of a program would.
		for _, d := range decl.FindAllStringSubmatch(m[1], -1) {
			for name := range strings.SplitSeq(d[1], ", ") {
				fmt.Fprintf(&src, "\t_ = %s\n", name)
			}
		}
		src.WriteString("}\n")
	}
	dir, err := filepath.Abs("testdata/readmesnippets")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "snippets.go")
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "snippets.go"): file}})
	overlay := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "-overlay="+overlay, "./testdata/readmesnippets")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's snippets do not compile: %v\n%s\nthe source:\n%s", err, out, src.String())
	}
}
