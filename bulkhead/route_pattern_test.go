package bulkhead_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
)

// TestRouteByPattern: with Config.RouteByPattern and the Handler inside the
// mux, a layer applies exactly to the requests the mux dispatched to the
// pattern written as its Route, precedence included; outside a mux, it falls
// back to routing.
func TestRouteByPattern(t *testing.T) {
	patterns := []string{"/items/", "GET /items/{id}", "/"}
	b, panicked := newRouteBulkhead(bulkhead.Config{RouteByPattern: true}, patterns...)
	if panicked != nil {
		t.Fatalf("New: %v", panicked)
	}
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
	for _, tc := range []struct {
		method, target string
		want           []uint64 // Admitted per layer after the request
	}{
		{"GET", "/items/7", []uint64{0, 1, 0}},     // the more specific pattern only
		{"POST", "/items/7", []uint64{1, 1, 0}},    // {id} is GET only: /items/ gets it
		{"GET", "/items/a%2Fb", []uint64{1, 2, 0}}, // id "a/b"
		{"GET", "/other", []uint64{1, 2, 1}},
		{"GET", "/items", []uint64{1, 2, 1}}, // a redirect to /items/: no layer
	} {
		r, _ := rawRequest(tc.method, tc.target, "example.com")
		mux.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
		st := b.Stats()
		for i, want := range tc.want {
			if got := st.Layers[i].Admitted; got != want {
				t.Errorf("after %s %s: layer %q admitted %d, want %d", tc.method, tc.target, patterns[i], got, want)
			}
		}
	}
	// Outside the mux (no Pattern), every pattern that matches applies.
	r, _ := rawRequest("GET", "/items/7", "example.com")
	b.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
	if st := b.Stats(); st.Layers[0].Admitted != 2 || st.Layers[1].Admitted != 3 || st.Layers[2].Admitted != 2 {
		t.Errorf("outside the mux: admitted %d %d %d, want 2 3 2", st.Layers[0].Admitted, st.Layers[1].Admitted, st.Layers[2].Admitted)
	}
}
