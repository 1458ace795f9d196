package bulkheadgrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/backoff"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ClientConfig configures [UnaryClientInterceptor]. The zero ClientConfig
// is valid: at most 3 attempts, delays up to 10s, no retry budget.
type ClientConfig struct {
	// Backoff, if non-nil, runs every call through this backoff.Client
	// (one per destination, shared by the calls to it): its retry budget,
	// its adaptive throttle (the SRE book's client-side throttling) and its
	// bounds apply (Config.MaxAttempts, MaxRetryAfter; MaxAttempts and
	// MaxDelay here are then ignored). A delayed ResourceExhausted or
	// Unavailable is a refusal to the Client, with [RetryDelay]'s delay;
	// every other answer is one the downstream gave (an accept, to the
	// throttle), returned as it is. A call the Client refuses itself,
	// throttled, is not sent and returns an error whose gRPC status is
	// Unavailable ("Throttled by the client.", with RetryInfo when the
	// Client estimates when the throttle lifts) and that matches
	// backoff.ErrThrottled (errors.Is) and wraps its *RejectError.
	//
	// A ResourceExhausted or Unavailable without a delay (a transport
	// failure, or a server that sheds without saying when to come back)
	// is an answer to the Client, not a refusal: against such a server the
	// throttle never engages. If the channel also has a gRPC retry policy,
	// its retries run inside each of the Client's attempts, so the server
	// may see MaxAttempts × the policy's attempts and the Client counts them
	// as one: use one or the other for a method.
	Backoff *backoff.Client

	// MaxAttempts bounds the attempts of one call, the first included. If
	// zero, 3; 1 never retries. Negative panics.
	MaxAttempts int

	// MaxDelay is the longest delay a refusal may ask for and still be
	// retried: a call refused with a longer delay returns the refusal at
	// once, as does one whose delay would end after the call's deadline. If
	// zero, 10s. Negative panics.
	MaxDelay time.Duration
}

// UnaryClientInterceptor returns a client interceptor that retries a call
// the server refused with ResourceExhausted or Unavailable and a retry
// delay ([RetryDelay]: the grpc-retry-pushback-ms trailer, else the
// status's google.rpc.RetryInfo), as bulkheadgrpc's servers answer
// refusals, starting the next attempt no earlier than that delay after the
// refusal. It returns the refusal as it is, without waiting, when the
// delay is longer than cfg.MaxDelay, when waiting it would pass the call's
// deadline, or when the call has had cfg.MaxAttempts attempts; and
// the context's status (Canceled, DeadlineExceeded) when the context ends
// while it waits. Any other error, a refusal without a delay included (an
// Unavailable from the transport, which gRPC's own retry and wait-for-ready
// handle), and any answer of a server that asked for no retry (a pushback
// that is negative or not a number, gRFC A6) is returned at once.
//
// With cfg.Backoff, the backoff.Client decides the retries instead, by the
// same delays, and spends its retry budget and its throttle (see
// ClientConfig.Backoff).
//
// Every attempt is a whole call to the next invoker (gRPC's own retry, if
// the channel has a retry policy, runs inside it). Streams are not retried
// here: a stream's refusal comes with its first message, after the client
// may have sent its own, which only gRPC's retry buffers; give streams a
// retry policy, which honours the pushback trailer.
func UnaryClientInterceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	if cfg.MaxAttempts < 0 {
		panic("bulkheadgrpc: negative ClientConfig.MaxAttempts")
	}
	if cfg.MaxDelay < 0 {
		panic("bulkheadgrpc: negative ClientConfig.MaxDelay")
	}
	maxAttempts := cfg.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = 3
	}
	maxDelay := cfg.MaxDelay
	if maxDelay == 0 {
		maxDelay = 10 * time.Second
	}
	if bc := cfg.Backoff; bc != nil {
		return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			var trailer metadata.MD
			opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
			err := bc.Do(ctx, func(ctx context.Context) error {
				trailer = nil
				err := invoker(ctx, method, req, reply, cc, opts...)
				if err == nil {
					return nil
				}
				if d, ok := RetryDelay(err, trailer); ok {
					return &refused{err: err, delay: d}
				}
				return err
			})
			return clientError(err)
		}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if maxAttempts == 1 {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		var trailer metadata.MD
		opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
		for attempt := 1; ; attempt++ {
			trailer = nil
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil {
				return nil
			}
			d, ok := RetryDelay(err, trailer)
			if !ok || attempt >= maxAttempts || d > maxDelay {
				return err
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
				return err
			}
			if err := sleep(ctx, d); err != nil {
				return status.FromContextError(err).Err()
			}
		}
	}
}

// refused is a server's refusal with a delay, as backoff.Client sees it:
// an error with RetryAfter.
type refused struct {
	err   error // the status error
	delay time.Duration
}

func (r *refused) Error() string             { return r.err.Error() }
func (r *refused) Unwrap() error             { return r.err }
func (r *refused) RetryAfter() time.Duration { return r.delay }

// clientError is the error a call through a backoff.Client returns for
// what Do returned: the server's status as it came, the context's status,
// or a throttled error.
func clientError(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *refused:
		return e.err
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		return status.FromContextError(err).Err()
	}
	if re, ok := errors.AsType[*floodgate.RejectError](err); ok && errors.Is(err, backoff.ErrThrottled) {
		return &throttled{re: re}
	}
	return err
}

// throttled is a call a backoff.Client refused itself: its gRPC status is
// Unavailable, and it wraps the Client's *RejectError.
type throttled struct{ re *floodgate.RejectError }

func (t *throttled) Error() string { return t.GRPCStatus().Err().Error() }
func (t *throttled) Unwrap() error { return t.re }

// GRPCStatus is the status the call gets (status.FromError, status.Code).
func (t *throttled) GRPCStatus() *status.Status {
	st := status.New(codes.Unavailable, "Throttled by the client.")
	if t.re.Delay > 0 {
		if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(t.re.Delay)}); err == nil {
			return d
		}
	}
	return st
}

// sleep waits d, or until ctx ends (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryDelay returns how long the server that answered a call with err and
// trailer asks the client to wait before retrying it, and whether it may be
// retried at all: only a ResourceExhausted or Unavailable status with a
// delay, the trailer's grpc-retry-pushback-ms ([PushbackKey], milliseconds)
// if it has one, else the status's google.rpc.RetryInfo. A pushback that is
// negative, not a number, or given more than once means no retry (gRFC A6),
// whatever RetryInfo says. The delay may be 0 (retry at once).
func RetryDelay(err error, trailer metadata.MD) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable {
		return 0, false
	}
	if v := trailer.Get(PushbackKey); len(v) > 0 {
		if len(v) > 1 {
			return 0, false
		}
		ms, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || ms < 0 || ms > int64(maxPushback/time.Millisecond) {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay != nil {
			if err := ri.RetryDelay.CheckValid(); err != nil {
				return 0, false
			}
			d := ri.RetryDelay.AsDuration()
			if d < 0 {
				return 0, false
			}
			return d, true
		}
	}
	return 0, false
}

// maxPushback bounds a pushback, so that its milliseconds fit a Duration.
const maxPushback = 24 * time.Hour * 365
