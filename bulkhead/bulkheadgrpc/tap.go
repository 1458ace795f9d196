package bulkheadgrpc

import (
	"context"
	"net"
	"net/netip"

	"github.com/floodgate-go/floodgate/bulkhead"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

// TapConfig configures a [TapHandle]. The zero TapConfig is valid: every
// call's identity is its peer's address.
type TapConfig struct {
	// Identity returns the identity a call is counted under at the tap,
	// from what the tap sees of it: info (the full method name and the
	// request metadata) and ctx (the connection's peer, see peer.FromContext;
	// the authentication interceptors have not run yet). It must not block
	// (see [TapHandle]). A call for which it reports false passes the tap
	// unchecked (the interceptors decide about it). If nil, the identity is
	// the peer's IP address: Tenant and Subject "peer:" followed by the
	// address, Tier "peer" (behind a proxy, the proxy's address); a call
	// with no IP peer passes unchecked.
	Identity func(ctx context.Context, info *tap.Info) (bulkhead.Identity, bool)
}

// TapHandle returns a tap.ServerInHandle (for grpc.InTapHandle) that runs
// each new call through tb's layers before gRPC sets up its stream, so a
// refused call costs the server no stream, no handler goroutine and no
// decoded message: the answer is written from the connection's reader.
//
// tb is a Bulkhead of its own, for the tap, of non-waiting layers only:
// rates (Layer.Rate, Layer.Tiers), keyed by the identity cfg.Identity gives.
// A tap admits a call and is done with it before the call runs, so a
// layer's gate would be held only while the tap decides, limiting nothing:
// gates belong in the Bulkhead of [UnaryServerInterceptor] and
// [StreamServerInterceptor], which hold them for the call's life. A call
// the tap admitted stays charged to the tap's rates if a later interceptor
// refuses it (the tap cannot know): the tap's rates count the calls that
// reach the server, the interceptors' the calls that are served.
//
// gRPC runs the tap on the connection's reader goroutine, one call at a
// time: while it decides, no other call or message of that connection is
// read. So its layers' rates should be local (shaper meters), or Redis ones
// whose round trip the connection can afford to wait for on every new call.
//
// A refused call gets [Status] of the refusal, with google.rpc.RetryInfo.
// gRPC writes a tap's refusal with no trailer of the tap's, so there is no
// [PushbackKey] trailer: gRPC's retry policy retries such a refusal with
// its own exponential backoff (if its code is retryable), while
// [UnaryClientInterceptor] waits the RetryInfo's delay.
func TapHandle(tb *bulkhead.Bulkhead, cfg TapConfig) tap.ServerInHandle {
	ident := cfg.Identity
	if ident == nil {
		ident = peerIdentity
	}
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		id, ok := ident(ctx, info)
		if !ok {
			return ctx, nil
		}
		err := tb.Do(bulkhead.WithIdentity(ctx, id), bulkhead.Request{Method: method, Path: info.FullMethodName}, noop)
		if err == nil {
			return ctx, nil
		}
		st, _ := toStatus(err)
		return ctx, st.Err()
	}
}

func noop(context.Context) error { return nil }

// peerIdentity is TapConfig.Identity's default: the peer's IP address.
func peerIdentity(ctx context.Context, _ *tap.Info) (bulkhead.Identity, bool) {
	a, ok := PeerAddr(ctx)
	if !ok {
		return bulkhead.Identity{}, false
	}
	key := "peer:" + a.String()
	return bulkhead.Identity{Tenant: key, Subject: key, Tier: "peer"}, true
}

// PeerAddr returns the IP address of the peer of the call or connection in
// ctx (peer.FromContext), and whether it has one: a Unix socket or an
// in-memory connection has none. It is the address of the TCP peer, a proxy
// when there is one.
func PeerAddr(ctx context.Context) (netip.Addr, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, false
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		a, ok := netip.AddrFromSlice(tcp.IP)
		return a.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
