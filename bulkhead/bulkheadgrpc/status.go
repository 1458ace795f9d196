package bulkheadgrpc

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// PushbackKey is the trailer metadata key of the server's retry pushback,
// which gRPC's own retry policy reads (gRFC A6): one value, whole
// milliseconds to wait before the next attempt.
const PushbackKey = "grpc-retry-pushback-ms"

// ErrorDomain is the Domain of the google.rpc.ErrorInfo in a refusal's
// status.
const ErrorDomain = "floodgate"

// Code returns the gRPC code of a refusal with the HTTP status httpStatus,
// as google.rpc.Code's HTTP mapping pairs them: 429 ResourceExhausted (a
// client's own quota), 503 Unavailable (global saturation, a request shed by
// criticality, a store unavailable under FailClosed), 401 Unauthenticated (no
// identity, an invalid key), 403 PermissionDenied (no policy for the tier),
// 500 Internal (a leaf's error); 400 InvalidArgument, 404 NotFound, 409
// Aborted, 499 Canceled, 501 Unimplemented, 504 DeadlineExceeded; any other
// 4xx FailedPrecondition, any other 5xx Unavailable, anything else Unknown.
func Code(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return codes.Unavailable
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusInternalServerError:
		return codes.Internal
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.Aborted
	case 499:
		return codes.Canceled
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	switch {
	case httpStatus >= 400 && httpStatus < 500:
		return codes.FailedPrecondition
	case httpStatus >= 500 && httpStatus < 600:
		return codes.Unavailable
	}
	return codes.Unknown
}

// Status returns the gRPC status a server answers the refusal e with: the
// code of e.Status (see [Code]); a fixed public message chosen by the code,
// as bulkhead's HTTP body is ("Quota exceeded. Retry in 2s."), never e's
// text, which names layers and leaves and is for logs; and the details
// google.rpc.ErrorInfo (Reason the refusal's word in upper case, LIMITED,
// NO_CAPACITY, SHED, ...; Domain [ErrorDomain]) and, when e has a delay,
// google.rpc.RetryInfo with that delay. A nil e is an Unknown status.
func Status(e *floodgate.RejectError) *status.Status {
	if e == nil {
		return status.New(codes.Unknown, "Request refused.")
	}
	code := Code(e.Status)
	msg := message(code)
	if s := reject.Seconds(e.Delay); s > 0 {
		msg += " Retry in " + strconv.FormatInt(s, 10) + "s."
	}
	reason := string(e.Reason)
	if reason == "" {
		reason = string(floodgate.ReasonError)
	}
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: strings.ToUpper(reason), Domain: ErrorDomain}
	var with *status.Status
	var err error
	if e.Delay > 0 {
		with, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(e.Delay)})
	} else {
		with, err = st.WithDetails(info)
	}
	if err != nil {
		return st // details that do not marshal: the code and message still hold
	}
	return with
}

// message is the public sentence of a refusal with code c, the words of
// bulkhead's HTTP body.
func message(c codes.Code) string {
	switch c {
	case codes.ResourceExhausted:
		return "Quota exceeded."
	case codes.Unavailable:
		return "Service temporarily unavailable."
	case codes.Unauthenticated:
		return "Authentication required."
	case codes.PermissionDenied:
		return "No quota for this client."
	case codes.Internal:
		return "Internal server error."
	}
	return "Request refused."
}

// pushbackMillis is d in whole milliseconds, rounded up: never 0 for a
// delay.
func pushbackMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// Pushback returns the trailer metadata that tells gRPC's retry policy to
// wait d before the next attempt ([PushbackKey], d in milliseconds rounded
// up), or nil when d is not positive.
func Pushback(d time.Duration) metadata.MD {
	if d <= 0 {
		return nil
	}
	return metadata.Pairs(PushbackKey, strconv.FormatInt(pushbackMillis(d), 10))
}

// toStatus returns the status a server answers with when bulkhead's Do
// returned err before the handler ran: the refusal's [Status], or, when the
// call's context ended while it waited for a gate, the context's status
// (Canceled, DeadlineExceeded). The refusal's delay is returned too, for the
// pushback trailer.
func toStatus(err error) (*status.Status, time.Duration) {
	var re *floodgate.RejectError
	if errors.As(err, &re) {
		return Status(re), re.Delay
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err), 0
	}
	// Not a refusal bulkhead makes: nothing about it is for the client.
	return status.New(codes.Internal, message(codes.Internal)), 0
}
