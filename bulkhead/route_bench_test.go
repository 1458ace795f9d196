package bulkhead_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
)

// routeLayers are five route layers as an application has them: one of them
// applies to GET /items/7, the others do not.
var routeLayers = []string{"POST /reports/export-pdf", "GET /items/{id}", "/static/", "DELETE /items/{id}", "/files/{path...}"}

// TestRouteAllocs: routing a request through route layers allocates nothing,
// except, for a path sent with escapes (URL.RawPath set), the one
// allocation of net/url's URL.EscapedPath, which ServeMux makes as well.
func TestRouteAllocs(t *testing.T) {
	b, panicked := newRouteBulkhead(bulkhead.Config{}, routeLayers...)
	if panicked != nil {
		t.Fatal(panicked)
	}
	h := b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range []struct {
		target string
		allocs float64
	}{{"/items/7", 0}, {"/nothing/here", 0}, {"/static/a/b/c", 0}, {"/items/a%2Fb", 1}} {
		target := tc.target
		r, _ := rawRequest("GET", target, "example.com")
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
		w := httptest.NewRecorder()
		if a := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); a > tc.allocs {
			t.Errorf("GET %s through %d route layers: %v allocs, want %v", target, len(routeLayers), a, tc.allocs)
		}
	}
}

// BenchmarkRoute: the cost of deciding which of five route layers apply.
func BenchmarkRoute(b *testing.B) {
	bh, panicked := newRouteBulkhead(bulkhead.Config{}, routeLayers...)
	if panicked != nil {
		b.Fatal(panicked)
	}
	h := bh.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, target := range []string{"/items/7", "/items/a%2Fb", "/nothing/here"} {
		r, _ := rawRequest("GET", target, "example.com")
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
		w := httptest.NewRecorder()
		b.Run("target="+target, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
