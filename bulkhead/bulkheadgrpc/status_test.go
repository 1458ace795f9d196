package bulkheadgrpc_test

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"google.golang.org/grpc/codes"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   codes.Code
	}{
		{429, codes.ResourceExhausted}, {503, codes.Unavailable}, {401, codes.Unauthenticated},
		{403, codes.PermissionDenied}, {500, codes.Internal}, {400, codes.InvalidArgument},
		{404, codes.NotFound}, {409, codes.Aborted}, {499, codes.Canceled}, {501, codes.Unimplemented},
		{502, codes.Unavailable}, {504, codes.DeadlineExceeded}, {418, codes.FailedPrecondition},
		{507, codes.Unavailable}, {0, codes.Unknown}, {200, codes.Unknown},
	} {
		if got := bulkheadgrpc.Code(tc.status); got != tc.code {
			t.Errorf("Code(%d) = %v, want %v", tc.status, got, tc.code)
		}
	}
}

// TestStatus: the message is chosen by the code, never the error's text;
// the delay is rounded up to whole seconds in it, exact in RetryInfo.
func TestStatus(t *testing.T) {
	e := &floodgate.RejectError{Reason: floodgate.ReasonLimited, Status: 429, Delay: 1200 * time.Millisecond, Layer: "secret-layer"}
	r := refusalOf(t, bulkheadgrpc.Status(e).Err(), nil)
	if r.code != codes.ResourceExhausted || r.msg != "Quota exceeded. Retry in 2s." || r.reason != "LIMITED" || r.delay != 1200*time.Millisecond {
		t.Errorf("Status(%v) = %+v", e, r)
	}
	r = refusalOf(t, bulkheadgrpc.Status(&floodgate.RejectError{Status: 500}).Err(), nil)
	if r.code != codes.Internal || r.msg != "Internal server error." || r.reason != "ERROR" || r.delay != -1 {
		t.Errorf("Status of a 500 without a reason or delay = %+v", r)
	}
	if md := bulkheadgrpc.Pushback(1500 * time.Microsecond); md.Get(bulkheadgrpc.PushbackKey)[0] != "2" {
		t.Errorf("Pushback(1.5ms) = %v, want 2 (ms, rounded up)", md)
	}
	if md := bulkheadgrpc.Pushback(0); md != nil {
		t.Errorf("Pushback(0) = %v, want nil", md)
	}
}
