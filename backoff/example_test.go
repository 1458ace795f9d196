package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/semaphore"
)

// A Client around any call: a refusal with a RetryAfter (here a full
// semaphore's, as another process's gate would answer) is retried after it.
func ExampleNew() {
	c := backoff.New(backoff.Config{Name: "reports"})
	gate := semaphore.New(1, semaphore.Config{})
	held, _ := gate.TryHold(context.Background(), 1) // someone holds the only slot
	time.AfterFunc(20*time.Millisecond, held.Release)

	attempts := 0
	err := c.Do(context.Background(), func(ctx context.Context) error {
		attempts++
		h, err := gate.TryHold(ctx, 1)
		if err != nil {
			var re *semaphore.RejectError
			if errors.As(err, &re) {
				re.Delay = 30 * time.Millisecond // as a server would ask
			}
			return err
		}
		defer h.Release()
		return nil // the call itself
	})
	st := c.Stats()
	fmt.Println(err, attempts, st.Retries, st.Refused)
	// Output: <nil> 2 1 1
}

// A Transport in an http.Client: the downstream's 503 with Retry-After: 0
// is retried, and the caller sees the answer that followed.
func ExampleTransport() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "invoice 42")
	}))
	defer srv.Close()

	c := backoff.New(backoff.Config{Name: "billing"}) // one per destination
	hc := &http.Client{Transport: &backoff.Transport{Client: c}}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	st := c.Stats()
	fmt.Println(resp.StatusCode, string(body), st.Attempts, st.Retries)
	// Output: 200 invoice 42 2 1
}
