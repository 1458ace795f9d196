package bulkhead_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// A PDF export route: 5 a minute and 2 at once per tenant, under a global cap;
// the tenant comes from the identity the authentication middleware verified.
func ExampleNew() {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: semaphore.New(100, semaphore.Config{}), MaxWait: time.Second},
		{Name: "export-rate", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)})},
		{Name: "export-conc", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant,
			KeyedGate: semaphore.NewKeyed(2, semaphore.KeyedConfig{}), MaxWait: -1},
	}})
	export := b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "pdf")
	}))
	// The application's authentication: here every request is tenant acme.
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := bulkhead.Identity{Tenant: "acme", Tier: "free"}
		export.ServeHTTP(w, r.WithContext(bulkhead.WithIdentity(r.Context(), id)))
	})
	for range 6 {
		w := httptest.NewRecorder()
		authed.ServeHTTP(w, httptest.NewRequest("POST", "/reports/export-pdf", nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}

	// The same layers for a code path that is not HTTP.
	ctx := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "globex"})
	err := b.Do(ctx, bulkhead.Request{Method: "POST", Path: "/reports/export-pdf"}, func(context.Context) error {
		fmt.Println("exporting for globex")
		return nil
	})
	fmt.Println(err)
	// Output:
	// 200  pdf
	// 200  pdf
	// 200  pdf
	// 200  pdf
	// 200  pdf
	// 429 12 {"error":"limited","message":"Quota exceeded. Retry in 12s.","retry_after_seconds":12}
	//
	// exporting for globex
	// <nil>
}
