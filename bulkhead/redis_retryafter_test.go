package bulkhead_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestRedisHonestRetryAfter: on a Redis-backed per-tenant rate, a client that
// is refused, waits the Retry-After it got (whole seconds, rounded up) and
// retries is admitted, in real time; and when another client of the same
// tenant uses the room during the wait, the retry is refused again (so the
// first half is not passing because the limit is not enforced).
func TestRedisHonestRetryAfter(t *testing.T) {
	db := redistest.Connect(t)
	// One per second, burst 1: Retry-After is 1 after a refusal right after an
	// admission, so each round costs about a second.
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(1), Burst: 1},
		shaperredis.Config{Prefix: db.Key("rate:")})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: m},
	}})
	srv := tenantServer(t, b, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
	c := srv.Client()
	c.Timeout = 10 * time.Second

	refused := func(who string) reply {
		t.Helper()
		rp := mustCall(t, c, srv.URL, "GET", "/", "acme")
		if rp.status != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d, want 429", who, rp.status)
		}
		if rp.retryAfter < 1 || rp.retryAfter > 2 {
			t.Fatalf("%s: Retry-After %d, want 1 (or 2 on a slow machine)", who, rp.retryAfter)
		}
		if rp.body.RetryAfterSeconds != rp.retryAfter {
			t.Errorf("%s: retry_after_seconds %d, Retry-After %d", who, rp.body.RetryAfterSeconds, rp.retryAfter)
		}
		return rp
	}

	if rp := mustCall(t, c, srv.URL, "GET", "/", "acme"); rp.status != http.StatusOK {
		t.Fatalf("first request: status %d, want 200", rp.status)
	}
	for round := range 2 {
		rp := refused("refusal")
		time.Sleep(time.Duration(rp.retryAfter) * time.Second) // the client's own wait: what the test is about
		if rp := mustCall(t, c, srv.URL, "GET", "/", "acme"); rp.status != http.StatusOK {
			t.Fatalf("round %d: retry after waiting Retry-After %ds: status %d (Retry-After %d), want 200",
				round, rp.retryAfter, rp.status, rp.retryAfter)
		}
	}

	// Someone else of the same tenant takes the room while the client waits:
	// the retry is refused again, for the same reason, with a new Retry-After.
	rp := refused("refusal before contention")
	time.Sleep(time.Duration(rp.retryAfter) * time.Second)
	if other := mustCall(t, c, srv.URL, "GET", "/", "acme"); other.status != http.StatusOK {
		t.Fatalf("other client after the wait: status %d, want 200", other.status)
	}
	refused("retry after another client used the room")

	if ls := layerStats(t, b, "tenant"); ls.Admitted != 4 || ls.Limited != 4 {
		t.Errorf("layer stats: admitted %d, limited %d; want 4 and 4", ls.Admitted, ls.Limited)
	}
}
