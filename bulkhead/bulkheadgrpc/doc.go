// Package bulkheadgrpc runs bulkhead's layers in front of gRPC services, as
// server interceptors and a tap handle, and gives gRPC clients an
// interceptor that waits as long as a refusal says before it retries.
//
// It is a module of its own (github.com/floodgate-go/floodgate/bulkhead/bulkheadgrpc),
// so that only the applications that import it have gRPC in their module
// graph: bulkhead and the rest of floodgate do not depend on it.
//
// # Server
//
// [UnaryServerInterceptor] and [StreamServerInterceptor] admit each call
// through a bulkhead.Bulkhead, as bulkhead's Handler admits an HTTP request,
// and hold the layers' gates until the handler returns: a unary call's
// handler, or a stream's, which returns when the stream ends. Chain them
// after the authentication interceptor, which verifies the caller and puts
// its identity in the context with bulkhead.WithIdentity:
//
//	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
//		{Name: "global", Gate: semaphore.New(200, semaphore.Config{}), MaxWait: 100 * time.Millisecond},
//		{Name: "tenant", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(50), Burst: 100})},
//		{Name: "export", Route: "/reports.v1.Reports/Export", Key: bulkhead.ByTenant,
//			KeyedGate: semaphore.NewKeyed(2, semaphore.KeyedConfig{}), MaxWait: -1},
//	}})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(authUnary, bulkheadgrpc.UnaryServerInterceptor(b)),
//		grpc.ChainStreamInterceptor(authStream, bulkheadgrpc.StreamServerInterceptor(b)),
//	)
//
// # Routes
//
// A call is the bulkhead.Request{Method: "POST", Path: "/pkg.Service/Method"}
// (its full method name), routed as bulkhead routes any request outside HTTP:
// a Layer.Route is a ServeMux pattern matched against that path. So
//
//   - "/pkg.Service/Method" (or "POST /pkg.Service/Method") selects one method;
//   - "/pkg.Service/" selects every method of a service, and
//     "/pkg.Service/{method}" does too;
//   - "/{service}/Method" selects the methods named Method of every service;
//   - no Route (or "/") selects every call.
//
// A pattern with another method ("GET /..."), with a host, or naming a
// service without its trailing slash ("/pkg.Service", which ServeMux would
// redirect) selects nothing. Layer.Match sees the same Request.
//
// # Identity and criticality
//
// bulkhead.Config.Anonymous and CriticalityHeader read an HTTP request,
// which a gRPC call does not have: a call without an identity is refused
// with Unauthenticated, whatever the layers. An authentication interceptor
// that admits anonymous callers gives them an identity of their own (the
// peer's address, see [PeerAddr]); one that knows a caller's criticality
// (an internal service's credential, a trusted mesh's metadata) sets
// Identity.Criticality, or Config.Criticality reads it.
//
// # Refusals
//
// A refused call is answered before its handler runs and before any header
// is sent (a trailers-only response, which gRPC's retry may retry), with
// [Status] of the refusal: the code of its HTTP status ([Code]:
// ResourceExhausted for a client's own quota, Unavailable for global
// saturation, a call shed by criticality or a store unavailable under
// FailClosed, Unauthenticated, PermissionDenied, Internal), a fixed public
// message ("Quota exceeded. Retry in 2s."; never the error's text, which
// names layers and stores and is for logs), google.rpc.ErrorInfo with the
// refusal's word, and, when there is a delay, google.rpc.RetryInfo and the
// trailer grpc-retry-pushback-ms ([PushbackKey]), which gRPC's own retry
// policy (a service config's retryPolicy with the code among its
// retryableStatusCodes) waits before its next attempt.
//
// # Tap
//
// [TapHandle] checks a Bulkhead of rates before gRPC even sets a call's
// stream up, so that a flood costs the server the least; it cannot hold a
// gate, and it runs on the connection's reader goroutine (see there).
//
// # Client
//
// [UnaryClientInterceptor] retries a call refused with ResourceExhausted or
// Unavailable that carries a delay (RetryInfo or the pushback trailer), no
// earlier than that delay, within the call's deadline and a bound on
// attempts and on the delay it accepts to wait. Given a backoff.Client
// (ClientConfig.Backoff), it retries through it, so that the Client's
// retry budget and adaptive throttle apply to the calls of a whole
// process, and a call the throttle refuses is never sent:
//
//	bc := backoff.New(backoff.Config{Name: "reports"})
//	cc, err := grpc.NewClient(addr,
//		grpc.WithTransportCredentials(creds),
//		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(bulkheadgrpc.ClientConfig{Backoff: bc})))
package bulkheadgrpc
