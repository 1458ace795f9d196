package bulkhead_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// The Redis-backed leaves fit bulkhead's interfaces.
var (
	_ bulkhead.Rate  = (*shaperredis.Meter)(nil)
	_ bulkhead.Rate  = (*shaperredis.Lease)(nil)
	_ floodgate.Gate = (*distsem.Semaphore)(nil)
)

// tenantServer is a real httptest.Server running h behind auth and b, where
// the bearer token is the tenant's name (every token is a verified tenant).
// If exited is not nil, it is signalled after b's handler has returned or
// panicked (its deferred releases done).
func tenantServer(t *testing.T, b *bulkhead.Bulkhead, h http.Handler, exited chan<- struct{}) *httptest.Server {
	t.Helper()
	inner := b.Handler(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exited != nil {
			defer func() { exited <- struct{}{} }()
		}
		if tok, ok := cutBearer(r); ok {
			r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: tok, Subject: tok}))
		}
		inner.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = discardLogger()
	t.Cleanup(srv.Close)
	return srv
}

func cutBearer(r *http.Request) (string, bool) {
	const p = "Bearer "
	if v := r.Header.Get("Authorization"); len(v) > len(p) && v[:len(p)] == p {
		return v[len(p):], true
	}
	return "", false
}
