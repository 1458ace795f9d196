package bulkhead_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
)

// pipeListener is a net.Listener over net.Pipe, so that a real http.Server and
// a real http.Client can run inside a synctest bubble (a TCP socket is not a
// durable block, a pipe is).
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "192.0.2.1:1234" }

// pipeServer starts h on an in-memory listener and returns a client for it.
// Everything is stopped at cleanup.
func pipeServer(t *testing.T, h http.Handler) *http.Client {
	t.Helper()
	l := newPipeListener()
	srv := &http.Server{Handler: h, ErrorLog: nil}
	srv.ErrorLog = discardLogger()
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	tr := &http.Transport{DialContext: l.dial, DisableKeepAlives: false}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		<-done
	})
	return &http.Client{Transport: tr}
}

// auth is the application's authentication middleware: it maps a bearer
// token it knows to a verified Identity; anything else gets no identity.
func auth(ids map[string]bulkhead.Identity, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if id, known := ids[tok]; ok && known {
			r = r.WithContext(bulkhead.WithIdentity(r.Context(), id))
		}
		next.ServeHTTP(w, r)
	})
}

// reply is what a client saw.
type reply struct {
	status     int
	retryAfter int // -1 if absent
	body       struct {
		Error             string `json:"error"`
		Message           string `json:"message"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
	}
	header http.Header
	raw    string
}

func call(t *testing.T, ctx context.Context, c *http.Client, base, method, path, token string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	rp := reply{status: resp.StatusCode, retryAfter: -1, header: resp.Header, raw: string(raw)}
	if v := resp.Header.Get("Retry-After"); v != "" {
		rp.retryAfter, err = strconv.Atoi(v)
		if err != nil {
			t.Fatalf("Retry-After %q: %v", v, err)
		}
	}
	if resp.StatusCode != http.StatusOK && len(raw) > 0 {
		if err := json.Unmarshal(raw, &rp.body); err != nil {
			t.Fatalf("rejection body %q: %v", raw, err)
		}
	}
	return rp, nil
}

func mustCall(t *testing.T, c *http.Client, base, method, path, token string) reply {
	t.Helper()
	rp, err := call(t, t.Context(), c, base, method, path, token)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return rp
}

func layerStats(t *testing.T, b *bulkhead.Bulkhead, name string) bulkhead.LayerStats {
	t.Helper()
	ls, ok := b.Stats().Layer(name)
	if !ok {
		t.Fatalf("no layer %q in Stats", name)
	}
	return ls
}

var errBoom = errors.New("boom")

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
