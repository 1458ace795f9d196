package bulkheadgrpc

import (
	"context"
	"sync"

	"github.com/floodgate-go/floodgate/bulkhead"
	"google.golang.org/grpc"
)

// method is bulkhead.Request.Method of every gRPC call: gRPC calls are
// HTTP/2 POSTs, so a Layer.Route "POST /pkg.Service/Method" selects them as
// "/pkg.Service/Method" does.
const method = "POST"

// UnaryServerInterceptor returns an interceptor that admits each unary call
// through b's layers before calling its handler, and holds the layers' gates
// until the handler returns (or panics). The call is the
// bulkhead.Request{Method: "POST", Path: info.FullMethod}, so a Layer.Route
// selects methods by their full name (see the package doc); its identity is
// the one an earlier interceptor put in the context with
// bulkhead.WithIdentity, so this interceptor goes after the authentication
// interceptor in grpc.ChainUnaryInterceptor. The handler runs under the
// context the layers' gates carry (a distsem lease's, cancelled when the
// lease is lost).
//
// A refused call is answered with [Status] of the refusal (ResourceExhausted
// for a client's quota, Unavailable for global saturation, a shed or a store
// unavailable, ...), with the retry delay as google.rpc.RetryInfo and as the
// trailer [PushbackKey], before the handler runs and before any header is
// sent, so that gRPC's retry policy may retry it. A call whose context ends
// while it waits for a gate is answered with the context's status (Canceled
// or DeadlineExceeded). Whatever the handler returns, its response, error,
// headers and trailers, reaches the client untouched.
func UnaryServerInterceptor(b *bulkhead.Bulkhead) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		u := unaryPool.Get().(*unary)
		u.req, u.handler = req, handler
		err := b.Do(ctx, bulkhead.Request{Method: method, Path: info.FullMethod}, u.fn)
		resp, ran := u.resp, u.ran
		*u = unary{fn: u.fn}
		unaryPool.Put(u)
		if ran {
			return resp, err
		}
		st, delay := toStatus(err)
		if md := Pushback(delay); md != nil {
			// Fails only outside a server call (an interceptor called by
			// hand): there is no trailer to set then.
			_ = grpc.SetTrailer(ctx, md)
		}
		return nil, st.Err()
	}
}

// unary is one admitted unary call: what the handler returned, and whether it
// ran (after which its error is the call's, whatever it is). They are
// pooled with fn, their call method as a value, made once: so a call costs
// no allocation of its own.
type unary struct {
	fn      func(context.Context) error
	req     any
	handler grpc.UnaryHandler
	resp    any
	ran     bool
}

var unaryPool = sync.Pool{New: func() any {
	u := &unary{}
	u.fn = u.call
	return u
}}

func (u *unary) call(ctx context.Context) error {
	u.ran = true
	var err error
	u.resp, err = u.handler(ctx, u.req)
	return err
}

// StreamServerInterceptor returns an interceptor that admits each streaming
// call through b's layers, as [UnaryServerInterceptor] does, and holds the
// layers' gates for the stream's whole life: until its handler returns, that
// is until the stream ends (the handler returns its status, or the client
// cancels and the handler sees its context done). The handler's stream
// carries the context of the layers' gates. A refused stream gets [Status]
// of the refusal and the [PushbackKey] trailer, before its handler runs.
func StreamServerInterceptor(b *bulkhead.Bulkhead) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		s := streamPool.Get().(*stream)
		s.srv, s.ss, s.handler = srv, ss, handler
		err := b.Do(ss.Context(), bulkhead.Request{Method: method, Path: info.FullMethod}, s.fn)
		ran := s.ran
		*s = stream{fn: s.fn}
		streamPool.Put(s)
		if ran {
			return err
		}
		st, delay := toStatus(err)
		if md := Pushback(delay); md != nil {
			ss.SetTrailer(md)
		}
		return st.Err()
	}
}

// stream is one admitted streaming call, pooled as unary is.
type stream struct {
	fn      func(context.Context) error
	srv     any
	ss      grpc.ServerStream
	handler grpc.StreamHandler
	ran     bool
}

var streamPool = sync.Pool{New: func() any {
	s := &stream{}
	s.fn = s.call
	return s
}}

func (s *stream) call(ctx context.Context) error {
	s.ran = true
	ss := s.ss
	if ctx != ss.Context() {
		ss = &ctxStream{ServerStream: ss, ctx: ctx}
	}
	return s.handler(s.srv, ss)
}

// ctxStream is a ServerStream whose Context is the context of the gates that
// admitted it.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
