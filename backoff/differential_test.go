package backoff_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/backoff"
)

// outcome is what a caller sees of one request.
type outcome struct {
	Status        int
	Proto         string
	Header        http.Header
	Trailer       http.Header
	Body          string
	ContentLength int64
	TE            []string
	Uncompressed  bool
	Err           string
	BodyErr       string
}

func observe(hc *http.Client, newReq func() *http.Request) outcome {
	resp, err := hc.Do(newReq())
	if err != nil {
		return outcome{Err: err.Error()}
	}
	defer resp.Body.Close()
	b, berr := io.ReadAll(resp.Body)
	o := outcome{
		Status: resp.StatusCode, Proto: resp.Proto, Header: resp.Header.Clone(), Trailer: resp.Trailer,
		Body: string(b), ContentLength: resp.ContentLength, TE: resp.TransferEncoding, Uncompressed: resp.Uncompressed,
	}
	if berr != nil {
		o.BodyErr = berr.Error()
	}
	o.Header.Del("Date") // the one field that may change between two requests
	return o
}

// TestDifferential sends the same requests through http.DefaultTransport
// and through a Transport (over it) to a real server on loopback: when the
// downstream does not refuse, or refuses in a way that is not retried, the
// caller sees the same statuses, headers, bodies and errors.
func TestDifferential(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Custom", "v")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q %s", r.Method, r.Header.Get("Content-Type"), b, r.Header.Get("Accept-Encoding"))
	})
	mux.HandleFunc("/404", http.NotFound)
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	mux.HandleFunc("/503", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600") // beyond MaxRetryAfter: returned as it is
		http.Error(w, "later", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/post503", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "refused", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		for i := range 3 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Sum", "3")
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		// "hi" gzipped.
		w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xca, 0xc8, 4, 4, 0, 0, 0xff, 0xff, 0xac, 0x2a, 0x93, 0xd8, 2, 0, 0, 0})
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/head", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "42")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "short")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut mid-body
	})
	s := httptest.NewServer(mux)
	defer s.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close() // connection refused

	req := func(method, url string, body string, h ...string) func() *http.Request {
		return func() *http.Request {
			var rb io.Reader
			if body != "" {
				rb = strings.NewReader(body)
			}
			r, err := http.NewRequest(method, url, rb)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(h); i += 2 {
				r.Header.Set(h[i], h[i+1])
			}
			return r
		}
	}
	withCtx := func(f func() *http.Request, ctx func() context.Context) func() *http.Request {
		return func() *http.Request { return f().WithContext(ctx()) }
	}
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	timesOut := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	cases := []struct {
		name string
		req  func() *http.Request
		has  string // in the outcome, so that a case tests what it says
	}{
		{"GET ok", req("GET", s.URL+"/ok", ""), "hello"},
		{"HEAD", req("HEAD", s.URL+"/head", ""), "ContentLength:42"},
		{"POST echo", req("POST", s.URL+"/echo", "payload", "Content-Type", "text/plain"), `POST text/plain "payload" gzip`},
		{"PUT echo", req("PUT", s.URL+"/echo", "payload"), `PUT  "payload"`},
		{"404", req("GET", s.URL+"/404", ""), "Status:404"},
		{"500", req("GET", s.URL+"/500", ""), "boom"},
		{"503 beyond MaxRetryAfter", req("GET", s.URL+"/503", ""), "Retry-After:[3600]"},
		{"POST 503 (not retried)", req("POST", s.URL+"/post503", "x"), "refused"},
		{"chunked with trailer", req("GET", s.URL+"/chunked", ""), "X-Sum:[3]"},
		{"gzip", req("GET", s.URL+"/gzip", ""), "Body:hi "},
		{"redirect", req("GET", s.URL+"/redirect", ""), "hello"},
		{"connection refused", req("GET", closedURL+"/", ""), "connection refused"},
		{"cut mid-body", req("GET", s.URL+"/cut", ""), "unexpected EOF"},
		{"ctx cancelled before", withCtx(req("GET", s.URL+"/ok", ""), cancelled), "context canceled"},
		{"ctx deadline while waiting", withCtx(req("GET", s.URL+"/slow", ""), timesOut), "deadline exceeded"},
	}
	bare := &http.Client{Transport: http.DefaultTransport}
	wrapped := &http.Client{Transport: &backoff.Transport{Client: backoff.New(backoff.Config{})}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := observe(bare, tc.req)
			got := observe(wrapped, tc.req)
			if !strings.Contains(fmt.Sprintf("%+v", want), tc.has) {
				t.Errorf("through http.DefaultTransport: %+v, want it to show %q", want, tc.has)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("through Transport:\n%+v\nthrough http.DefaultTransport:\n%+v", got, want)
			}
		})
	}
}
