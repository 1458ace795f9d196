package bulkhead_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
)

// Three report renderers, one of them kept for critical requests: batch
// requests never wait, and are shed when the two others are busy.
func ExampleCriticality() {
	b := bulkhead.New(bulkhead.Config{
		Layers: []bulkhead.Layer{{Name: "renderers", Gate: semaphore.New(3, semaphore.Config{}),
			Classes: []bulkhead.Criticality{
				{Name: "critical", Reserved: 1},
				{Name: "batch", MaxWait: -1},
			}}},
		// The class from the verified identity: here, from the route.
		Criticality: func(id bulkhead.Identity, r bulkhead.Request) string {
			if r.Path == "/reports/nightly" {
				return "batch"
			}
			return "critical"
		},
	})
	render := b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pdf") }))
	serve := func(path string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", path, nil)
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "acme"}))
		render.ServeHTTP(w, r)
		fmt.Println(path, w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}

	// Two nightly renders are running.
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme"})
	running, done := make(chan bool), make(chan bool)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			b.Do(ctx, bulkhead.Request{Path: "/reports/nightly"}, func(context.Context) error {
				running <- true
				<-done
				return nil
			})
		})
		<-running
	}
	serve("/reports/nightly") // the last renderer is the critical class's
	serve("/reports/export")
	close(done)
	wg.Wait()
	// Output:
	// /reports/nightly 503 1 {"error":"shed","message":"Service temporarily unavailable. Retry in 1s.","retry_after_seconds":1}
	//
	// /reports/export 200  pdf
}
