package bulkhead_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/shaper"
)

// admitAll is a Rate that admits everything: a layer's Admitted count then
// says how many requests it applied to.
type admitAll struct{}

func (admitAll) Admit(context.Context, string, int64) (shaper.Decision, error) {
	return shaper.Decision{Allowed: true}, nil
}

// routePatterns are valid ServeMux patterns: wildcards, {name...}, {$},
// trailing slashes, methods (GET also serves HEAD), hosts, escaped literals,
// and the oddities ServeMux accepts (an empty literal segment, an unclean
// path without a method).
var routePatterns = []string{
	"/",
	"/{$}",
	"GET /{$}",
	"GET /",
	"POST /",
	"HEAD /",
	"GET /items/{id}",
	"/items/{id}",
	"POST /items/{id}",
	"GET /items/{id}/parts",
	"/items/{id}/{$}",
	"/items/",
	"/items",
	"GET /items",
	"HEAD /items",
	"/items/{$}",
	"/Items",
	"/files/{path...}",
	"GET /files/{path...}",
	"/files/{$}",
	"/a/{x}/c",
	"/a/{x}/{y}/",
	"/{a}/{b}",
	"/{a}",
	"/a//b",
	"/a%2Fb",
	"/a%2fb/{x}",
	"/%61/b",
	"/items/a%2Fb",
	"/a;b",
	"/static/",
	"/x/./y",
	"/.well-known/{rest...}",
	"example.com/",
	"example.com/items/{id}",
	"GET example.com/items/{id}",
	"Example.com/items/{id}",
	"example.com:8080/x",
	"CONNECT /tunnel",
	"CONNECT example.com/",
	"OPTIONS /",
	"GET\t/tab",
	"DELETE /items/{id...}",
	" /leading-space",
	"/x}",
	"/%2F",
	"//",
}

// routeTargets are raw request targets: escaped slashes and dots, dot
// segments, double slashes, semicolons, case, trailing slashes, queries,
// absolute form.
var routeTargets = []string{
	"/", "*", "/?q=1",
	"/items", "/items/", "/items/7", "/items/7/", "/items/7/parts", "/items/7/parts/",
	"/items/a%2Fb", "/items/a%2fb", "/items/%2F", "/items/%2f", "/items/%2F%2F",
	"/items/%2E%2E", "/items/%2e", "/items/..", "/items/.", "/items/../admin",
	"/items/./7", "/items//7", "//items/7", "/items/7?x=1", "/items?x=/y", "/items/7?",
	"/Items", "/Items/7", "/ITEMS", "/items;x", "/items/7;jsessionid=1", "/items%2F7", "/items%2f",
	"/%69tems/7", "/items/%37", "/items/7%2F", "/items%2F",
	"/files", "/files/", "/files/a/b/c", "/files/a%2Fb", "/files/../etc/passwd", "/files/%2E%2E/x",
	"/a/b/c", "/a/b/c/", "/a/%2F/c", "/a//c", "/a/b%2Fc", "/a/b/d", "/a/b/", "/a/b",
	"/a%2Fb", "/a%2fb", "/a%2Fb/x", "/a%2fb/x", "/%61/b", "/a/b%2F",
	"/static", "/static/x", "/static/.", "/x/./y", "/x/y",
	"/.well-known/acme", "/.well-known/", "/%2Ewell-known/acme",
	"/a;b", "/a%3Bb", "/a;b/", "/tunnel", "/tab",
	"http://example.com/items/7", "http://other.com/items/7", "http://example.com",
	"/%7Bid%7D", "/items/%7Bid%7D", "/items/%20", "/items/+",
}

// routeHosts are the Host fields the targets are sent with: the first for
// every target, the others for the targets a host pattern could tell apart.
var routeHosts = []string{"example.com", "Example.com", "example.com:8080", "other.com", "[::1]:80"}

// rawRequest parses a request line and Host field as net/http's server does,
// so that URL.RawPath and EscapedPath are what a handler sees. ok is false
// when the server would refuse the request before any handler.
func rawRequest(method, target, host string) (*http.Request, bool) {
	raw := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		return nil, false
	}
	r.RemoteAddr = "192.0.2.1:1234"
	return r, true
}

// muxRoutes reports whether a ServeMux with only pattern would call its
// handler for the request (not a redirect, a 404, a 405 or a 400).
func muxRoutes(pattern, method, target, host string) (routed, ok bool) {
	r, ok := rawRequest(method, target, host)
	if !ok {
		return false, false
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) { routed = true })
	mux.ServeHTTP(httptest.NewRecorder(), r)
	return routed, true
}

type routeCase struct{ method, target, host string }

// routeCases is the request corpus: every target with GET, HEAD, POST and
// DELETE on the first host, the host-sensitive ones on every host, and
// CONNECT in authority and path form.
func routeCases() []routeCase {
	var cs []routeCase
	for _, target := range routeTargets {
		for _, m := range []string{"GET", "HEAD", "POST", "DELETE", "OPTIONS"} {
			cs = append(cs, routeCase{m, target, routeHosts[0]})
		}
		if strings.HasPrefix(target, "/items") || target == "/" || target == "/x" {
			for _, h := range routeHosts[1:] {
				cs = append(cs, routeCase{"GET", target, h})
			}
		}
	}
	for _, target := range []string{"/x", "/items/7", "/"} {
		cs = append(cs, routeCase{"GET", target, "example.com:8080"})
	}
	for _, target := range []string{"example.com:443", "/tunnel", "/tunnel/", "/", "/a/../tunnel"} {
		for _, h := range []string{"example.com", "example.com:443"} {
			cs = append(cs, routeCase{"CONNECT", target, h})
		}
	}
	return cs
}

// newRouteBulkhead returns a Bulkhead with one always-admitting layer per
// pattern, or the panic New raised.
func newRouteBulkhead(cfg bulkhead.Config, patterns ...string) (b *bulkhead.Bulkhead, panicked any) {
	defer func() { panicked = recover() }()
	for i, p := range patterns {
		cfg.Layers = append(cfg.Layers, bulkhead.Layer{Name: fmt.Sprint("r", i), Route: p, Rate: admitAll{}})
	}
	return bulkhead.New(cfg), nil
}

// layerApplies reports whether b's only layer applied to the request.
func layerApplies(t *testing.T, b *bulkhead.Bulkhead, method, target, host string) bool {
	t.Helper()
	r, ok := rawRequest(method, target, host)
	if !ok {
		t.Fatalf("%s %s: unparsable", method, target)
	}
	r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
	before := b.Stats().Layers[0].Admitted
	b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), r)
	return b.Stats().Layers[0].Admitted != before
}

// TestRouteDifferential: for every pattern × request of the corpus, a layer
// with Route p applies if and only if a real ServeMux with only p registered
// would call p's handler for that request.
func TestRouteDifferential(t *testing.T) {
	cases := routeCases()
	pairs, mismatches := 0, 0
	for _, p := range routePatterns {
		b, panicked := newRouteBulkhead(bulkhead.Config{}, p)
		if panicked != nil {
			t.Errorf("New with Route %q panicked (%v); ServeMux accepts it", p, panicked)
			continue
		}
		for _, c := range cases {
			want, ok := muxRoutes(p, c.method, c.target, c.host)
			if !ok {
				continue
			}
			pairs++
			if got := layerApplies(t, b, c.method, c.target, c.host); got != want {
				mismatches++
				t.Errorf("Route %q, %s %s (Host %s): layer applied %v, ServeMux routes it to the pattern: %v", p, c.method, c.target, c.host, got, want)
			}
		}
	}
	t.Logf("%d pattern × request pairs, %d mismatches", pairs, mismatches)
	if pairs < 500 {
		t.Errorf("only %d pairs, want at least 500", pairs)
	}
}

// TestRouteDifferentialDo: Do, without an *http.Request, routes Request.Path
// as ServeMux routes a request whose URL.Path it is (RawPath empty, no host).
func TestRouteDifferentialDo(t *testing.T) {
	paths := []string{"", "/", "/items", "/items/", "/items/7", "/items/a/b", "/items/a b", "/items/%2F",
		"/items/..", "/items/./7", "/items//7", "/a//b", "/a/b", "/a/x/b", "/a/b/c", "/files/a/b",
		"/.well-known/x", "/x/./y", "/a;b", "/Items", "items", "/items/7?x", "/items/{id}", "/a%2Fb"}
	pairs := 0
	for _, p := range routePatterns {
		b, panicked := newRouteBulkhead(bulkhead.Config{}, p)
		if panicked != nil {
			t.Errorf("New with Route %q panicked (%v); ServeMux accepts it", p, panicked)
			continue
		}
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
		for _, path := range paths {
			for _, m := range []string{"GET", "HEAD", "POST", "CONNECT"} {
				routed := false
				mux := http.NewServeMux()
				mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) { routed = true })
				mux.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: m, URL: &url.URL{Path: path}, Header: http.Header{}})
				before := b.Stats().Layers[0].Admitted
				b.Do(ctx, bulkhead.Request{Method: m, Path: path}, ok)
				pairs++
				if got := b.Stats().Layers[0].Admitted != before; got != routed {
					t.Errorf("Route %q, Do %s %q: layer applied %v, ServeMux routes it to the pattern: %v", p, m, path, got, routed)
				}
			}
		}
	}
	t.Logf("%d pattern × request pairs", pairs)
}

// invalidPatterns are patterns ServeMux rejects.
var invalidPatterns = []string{
	"GET", "GET items", "items", "/a/x{id}", "/{id}/{id}", "/{$}/x", "/{x...}/y", "/{}", "/{1x}",
	"GET /a/../b", "GET /a//b", "G@T /x", "example.com{x}/", "/{x}{y}", "/{x", "/{...}", "GÉT /x",
	"GET /a/.", "/{$x}", "/{a b}",
}

// TestRouteInvalidPatterns: a pattern ServeMux rejects panics in New with a
// bulkhead: message naming the layer.
func TestRouteInvalidPatterns(t *testing.T) {
	for _, p := range invalidPatterns {
		func() {
			defer func() { recover() }()
			http.NewServeMux().Handle(p, http.NotFoundHandler())
			if !strings.Contains(os.Getenv("GODEBUG"), "httpmuxgo121=1") { // Go 1.21's ServeMux accepts anything
				t.Errorf("ServeMux accepts %q: not an invalid pattern", p)
			}
		}()
		_, panicked := newRouteBulkhead(bulkhead.Config{}, p)
		if msg := fmt.Sprint(panicked); panicked == nil || !strings.HasPrefix(msg, "bulkhead: layer r0: ") {
			t.Errorf("New with Route %q: panic %v, want one starting %q", p, panicked, "bulkhead: layer r0: ")
		}
	}
}

// TestRouteWithinFullMux: whatever pattern an application's ServeMux
// dispatches a request to, a layer with that Route applies to it: a more
// specific pattern elsewhere in the mux cannot take requests out of a
// layer's reach (a layer routes as if its pattern were alone, so it applies
// to a superset of what the full mux gives its pattern).
func TestRouteWithinFullMux(t *testing.T) {
	mux := http.NewServeMux()
	var registered []string
	var routedTo string
	for _, p := range routePatterns {
		func() {
			defer func() { recover() }() // skip patterns that conflict with earlier ones
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { routedTo = r.Pattern })
			registered = append(registered, p)
		}()
	}
	b, panicked := newRouteBulkhead(bulkhead.Config{}, registered...)
	if panicked != nil {
		t.Fatalf("New: %v", panicked)
	}
	layerOf := map[string]int{}
	for i, p := range registered {
		layerOf[p] = i
	}
	h := b.Handler(mux)
	checked := 0
	for _, c := range routeCases() {
		r, ok := rawRequest(c.method, c.target, c.host)
		if !ok {
			continue
		}
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
		before := b.Stats()
		routedTo = ""
		h.ServeHTTP(httptest.NewRecorder(), r)
		if routedTo == "" {
			continue
		}
		checked++
		i := layerOf[routedTo]
		if b.Stats().Layers[i].Admitted == before.Layers[i].Admitted {
			t.Errorf("%s %s (Host %s): the mux routed it to %q, but that layer did not apply", c.method, c.target, c.host, routedTo)
		}
	}
	t.Logf("%d patterns in one mux, %d routed requests checked", len(registered), checked)
}

// TestRouteEndToEnd: through a real server on a socket, for a subset of the
// corpus: a request reaches the pattern's handler through b.Handler(mux) if
// and only if the layer applied to it.
func TestRouteEndToEnd(t *testing.T) {
	patterns := []string{"GET /items/{id}", "/{$}", "/files/{path...}", "/items/", "example.com/items/{id}", "/a%2Fb", "GET /items"}
	for _, p := range patterns {
		b, panicked := newRouteBulkhead(bulkhead.Config{}, p)
		if panicked != nil {
			t.Errorf("New with Route %q panicked (%v)", p, panicked)
			continue
		}
		mux := http.NewServeMux()
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "routed") })
		srv := httptest.NewServer(auth(map[string]bulkhead.Identity{"t": {Tenant: "a"}}, b.Handler(mux)))
		for _, target := range routeTargets {
			for _, host := range []string{"example.com", "other.com"} {
				before := b.Stats().Layers[0].Admitted
				status, body := rawRoundTrip(t, srv.Listener.Addr().String(), "GET", target, host)
				applied := b.Stats().Layers[0].Admitted != before
				reached := status == 200 && body == "routed"
				if applied != reached {
					t.Errorf("Route %q, GET %s (Host %s): layer applied %v, handler reached %v (status %d)", p, target, host, applied, reached, status)
				}
			}
		}
		srv.Close()
	}
}

// rawRoundTrip sends one request with a raw request line, so that the
// client does not clean or re-escape the target.
func rawRoundTrip(t *testing.T, addr, method, target, host string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n", method, target, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// FuzzRoute: the differential test on generated patterns and requests.
func FuzzRoute(f *testing.F) {
	for i, p := range routePatterns {
		c := routeCases()[i*7%len(routeCases())]
		f.Add(p, c.method, c.target, c.host)
	}
	for _, p := range invalidPatterns {
		f.Add(p, "GET", "/", "example.com")
	}
	f.Fuzz(func(t *testing.T, pattern, method, target, host string) {
		if pattern == "" {
			return // no Route: every request
		}
		rejected := false
		func() {
			defer func() { rejected = recover() != nil }()
			http.NewServeMux().Handle(pattern, http.NotFoundHandler())
		}()
		if rejected { // so must New
			if _, panicked := newRouteBulkhead(bulkhead.Config{}, pattern); !strings.HasPrefix(fmt.Sprint(panicked), "bulkhead: layer r0: ") {
				t.Fatalf("New with Route %q that ServeMux rejects: panic %v", pattern, panicked)
			}
			return
		}
		want, ok := muxRoutes(pattern, method, target, host)
		if !ok {
			return
		}
		b, panicked := newRouteBulkhead(bulkhead.Config{}, pattern)
		if panicked != nil {
			t.Fatalf("New with Route %q panicked (%v); ServeMux accepts it", pattern, panicked)
		}
		if got := layerApplies(t, b, method, target, host); got != want {
			t.Errorf("Route %q, %s %s (Host %s): layer applied %v, ServeMux routes it to the pattern: %v", pattern, method, target, host, got, want)
		}
	})
}
