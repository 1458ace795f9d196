package backoff_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/backoff"
)

// FuzzRetryAfter: a Retry-After value parses to a delay that is never
// negative; delay-seconds round-trip; an HTTP-date a whole number of
// seconds ahead is that delay.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "1", "120", "-1", "1.5", "99999999999999999999", "Fri, 02 Jan 2026 03:05:35 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := backoff.RetryAfter(v, now)
		if d < 0 || !ok && d != 0 {
			t.Fatalf("retryAfter(%q) = %v, %v", v, d, ok)
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n < 1<<32 && d != time.Duration(n)*time.Second {
			t.Fatalf("retryAfter(%q) = %v, want %d s", v, d, n)
		}
		if ok && d > 0 && d < 1<<40 && d%time.Second == 0 {
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				if tt, err := http.ParseTime(v); err != nil || tt.Sub(now) != d {
					t.Fatalf("retryAfter(%q) = %v: neither seconds nor that date", v, d)
				}
			}
		}
	})
}
