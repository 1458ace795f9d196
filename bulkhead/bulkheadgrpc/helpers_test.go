package bulkheadgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Full method names of the test service.
const (
	emptyCall  = "/grpc.testing.TestService/EmptyCall"
	unaryCall  = "/grpc.testing.TestService/UnaryCall"
	streamCall = "/grpc.testing.TestService/StreamingOutputCall"
	duplexCall = "/grpc.testing.TestService/FullDuplexCall"
)

// service is grpc.testing.TestService. EmptyCall, UnaryCall and
// StreamingOutputCall, once they have sent their responses, wait while hold
// is set: until release is closed, or the call's context ends (then they
// return its status). entered, if not nil, receives the full method name
// of every handler that starts, if it has room; calls counts them.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	hold    bool
	release chan struct{}
	entered chan string
	calls   atomic.Int64
}

func (s *service) start(ctx context.Context) {
	s.calls.Add(1)
	if s.entered != nil {
		m, _ := grpc.Method(ctx)
		select {
		case s.entered <- m:
		default: // nobody waits for this one
		}
	}
}

// wait blocks while s holds calls; it returns ctx's status if ctx ends first.
func (s *service) wait(ctx context.Context) error {
	if !s.hold {
		return nil
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (s *service) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.start(ctx)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

// UnaryCall echoes the payload, sets a header and a trailer, and answers
// with the requested status (and a detail) when there is one.
func (s *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.start(ctx)
	grpc.SetHeader(ctx, metadata.Pairs("x-handler", "unary"))
	grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "unary", "x-size", strings.Repeat("z", int(req.ResponseSize%7))))
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if rs := req.GetResponseStatus(); rs != nil && rs.Code != 0 {
		st, _ := status.New(codes.Code(rs.Code), rs.Message).WithDetails(&errdetails.ErrorInfo{Reason: "HANDLER", Domain: "test"})
		return nil, st.Err()
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: bytes.Repeat(req.GetPayload().GetBody(), 2)}}, nil
}

// StreamingOutputCall sends one response per ResponseParameters, of that
// size, then waits while s holds, then returns the requested status.
func (s *service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	ctx := ss.Context()
	s.start(ctx)
	ss.SetHeader(metadata.Pairs("x-handler", "stream"))
	for _, p := range req.ResponseParameters {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.Size)}}); err != nil {
			return err
		}
	}
	ss.SetTrailer(metadata.Pairs("x-trailer", "stream"))
	if err := s.wait(ctx); err != nil {
		return err
	}
	if rs := req.GetResponseStatus(); rs != nil && rs.Code != 0 {
		return status.Error(codes.Code(rs.Code), rs.Message)
	}
	return nil
}

// FullDuplexCall echoes each request's payload until the client closes.
func (s *service) FullDuplexCall(ss grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	s.start(ss.Context())
	for {
		req, err := ss.Recv()
		if err == io.EOF {
			ss.SetTrailer(metadata.Pairs("x-trailer", "duplex"))
			return nil
		}
		if err != nil {
			return err
		}
		if rs := req.GetResponseStatus(); rs != nil && rs.Code != 0 {
			return status.Error(codes.Code(rs.Code), rs.Message)
		}
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: req.Payload}); err != nil {
			return err
		}
	}
}

// auth is the authentication interceptor of the tests: the bearer token in
// "authorization" is the tenant (every token is a verified tenant), and
// "x-class", trusted here, its criticality.
func auth(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	tok, ok := strings.CutPrefix(first(md, "authorization"), "Bearer ")
	if !ok {
		return ctx
	}
	return bulkhead.WithIdentity(ctx, bulkhead.Identity{Tenant: tok, Subject: tok, Criticality: first(md, "x-class")})
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(auth(ctx), req)
}

func authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &ctxStream{ServerStream: ss, ctx: auth(ss.Context())})
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// exitSignal returns interceptors, to chain before bulkheadgrpc's, that send
// on exited when the calls inside them have returned: bulkheadgrpc's
// interceptor, and so its releases, are done.
func exitSignal(exited chan<- string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			defer func() { exited <- info.FullMethod }()
			return h(ctx, req)
		}, func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			defer func() { exited <- info.FullMethod }()
			return h(srv, ss)
		}
}

// rig is a real gRPC server on loopback TCP.
type rig struct {
	addr string
	srv  *grpc.Server
}

// serverConfig says how to build a test server.
type serverConfig struct {
	b      *bulkhead.Bulkhead // nil: a bare server, no interceptors at all
	exited chan<- string      // see exitSignal
	opts   []grpc.ServerOption
}

// serve starts svc on a gRPC server on 127.0.0.1, behind auth and
// bulkheadgrpc's interceptors for cfg.b; it is stopped when the test ends.
func serve(t testing.TB, svc testgrpc.TestServiceServer, cfg serverConfig) *rig {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	opts := cfg.opts
	if cfg.b != nil {
		us := []grpc.UnaryServerInterceptor{authUnary}
		ss := []grpc.StreamServerInterceptor{authStream}
		if cfg.exited != nil {
			u, s := exitSignal(cfg.exited)
			us, ss = append(us, u), append(ss, s)
		}
		us = append(us, bulkheadgrpc.UnaryServerInterceptor(cfg.b))
		ss = append(ss, bulkheadgrpc.StreamServerInterceptor(cfg.b))
		opts = append(opts, grpc.ChainUnaryInterceptor(us...), grpc.ChainStreamInterceptor(ss...))
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return &rig{addr: lis.Addr().String(), srv: srv}
}

// dial returns a client of addr over insecure loopback TCP, closed when the
// test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", addr, err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// as returns ctx with tenant's bearer token in the outgoing metadata.
func as(ctx context.Context, tenant string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tenant)
}

// refusal is what a client sees of a refused call.
type refusal struct {
	code     codes.Code
	msg      string
	reason   string        // ErrorInfo's
	delay    time.Duration // RetryInfo's; -1 if none
	pushback []string      // the trailer's values
}

func refusalOf(t testing.TB, err error, trailer metadata.MD) refusal {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a status", err)
	}
	r := refusal{code: st.Code(), msg: st.Message(), delay: -1, pushback: trailer.Get(bulkheadgrpc.PushbackKey)}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			r.delay = d.RetryDelay.AsDuration()
		case *errdetails.ErrorInfo:
			if d.Domain == bulkheadgrpc.ErrorDomain {
				r.reason = d.Reason
			}
		}
	}
	return r
}

// layerStats returns b's stats of layer name.
func layerStats(t testing.TB, b *bulkhead.Bulkhead, name string) bulkhead.LayerStats {
	t.Helper()
	ls, ok := b.Stats().Layer(name)
	if !ok {
		t.Fatalf("no layer %q", name)
	}
	return ls
}

// recvAll reads a stream to its end and returns its messages and final
// error (nil at a clean end).
func recvAll[T any](s grpc.ServerStreamingClient[T]) ([]*T, error) {
	var out []*T
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}
