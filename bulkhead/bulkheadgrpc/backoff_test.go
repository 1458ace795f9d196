package bulkheadgrpc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/backoff"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"github.com/floodgate-go/floodgate/shaper"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestBackoffRetriesAfterDelay: through a backoff.Client the interceptor
// retries a quota refusal no earlier than its delay, and the Client counts
// the refusal and the retry.
func TestBackoffRetriesAfterDelay(t *testing.T) {
	const interval = 300 * time.Millisecond
	addr, a := rateServer(t, shaper.Limit{Rate: shaper.Every(interval), Burst: 1})
	bc := backoff.New(backoff.Config{Name: "test"})
	c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: bc})))
	ctx := as(t.Context(), "acme")
	for i := range 2 {
		if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	at, cs := a.snapshot()
	if len(at) != 3 || cs[1] != codes.ResourceExhausted || cs[2] != codes.OK {
		t.Fatalf("server saw %v; want OK, ResourceExhausted, OK", cs)
	}
	if gap := at[2].Sub(at[0]); gap < interval {
		t.Errorf("retry %v after the admitted call, want at least %v", gap, interval)
	}
	if st := bc.Stats(); st.Calls != 2 || st.Attempts != 3 || st.Retries != 1 || st.Refused != 1 {
		t.Errorf("backoff stats %+v, want 2 calls, 3 attempts, 1 retry, 1 refused", st)
	}
}

// TestBackoffBudget: the Client's retry budget bounds the retries across
// calls: with a floor of 2 retries and no throttle, a server that refuses
// everything sees 3 attempts of the first call and 1 of each later one,
// and each call gets the server's status as it came.
func TestBackoffBudget(t *testing.T) {
	addr, n, _ := refuser(t, codes.ResourceExhausted, 5*time.Millisecond, "")
	bc := backoff.New(backoff.Config{MaxAttempts: 3, MinRetries: 2, RetryBudget: -1, K: -1})
	c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: bc})))
	for i := range 3 {
		_, err := c.EmptyCall(t.Context(), &testgrpc.Empty{})
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || st.Message() != "refused" {
			t.Errorf("call %d: %v, want the server's ResourceExhausted", i+1, err)
		}
	}
	if got := n(); got != 5 {
		t.Errorf("server saw %d attempts, want 5 (3, then 1 and 1: the budget of 2 retries spent)", got)
	}
	if st := bc.Stats(); st.Retries != 2 || st.BudgetExhausted != 2 {
		t.Errorf("backoff stats %+v, want 2 retries, 2 budget exhausted", st)
	}
}

// TestBackoffThrottled: against a server that refuses everything, the
// Client's throttle refuses calls itself: those are never sent, and their
// error is an Unavailable status that matches backoff.ErrThrottled.
func TestBackoffThrottled(t *testing.T) {
	addr, n, _ := refuser(t, codes.Unavailable, time.Millisecond, "")
	bc := backoff.New(backoff.Config{MaxAttempts: 1, MinRequests: 5})
	c := dial(t, addr, grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: bc})))
	throttled := 0
	for range 200 {
		_, err := c.EmptyCall(t.Context(), &testgrpc.Empty{})
		if !errors.Is(err, backoff.ErrThrottled) {
			if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "refused" {
				t.Fatalf("sent call: %v, want the server's Unavailable", err)
			}
			continue
		}
		throttled++
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || st.Message() != "Throttled by the client." {
			t.Errorf("throttled call's status: %v, want Unavailable, the public message", st)
		}
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay.AsDuration() <= 0 {
				t.Errorf("throttled call's RetryInfo %v", ri.RetryDelay.AsDuration())
			}
		}
	}
	if throttled == 0 {
		t.Fatal("no call of 200 throttled against a server refusing everything")
	}
	if sent := n(); sent+throttled != 200 || int64(throttled) != bc.Stats().Throttled {
		t.Errorf("%d sent + %d throttled, Stats.Throttled %d; want 200 in all, and the Stats' count", sent, throttled, bc.Stats().Throttled)
	}
}
