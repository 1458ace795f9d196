package bulkhead

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
)

// An Identity is who a request is for, as the application's authentication
// layer verified it: the key of every per-client layer comes from here, never
// from a header or a tenant id the client sent.
type Identity struct {
	Tenant  string // the account quotas are charged to (API key's owner, JWT tenant claim)
	Tier    string // the plan that picks a layer's Rate from Layer.Tiers ("free", "gold")
	Subject string // the principal inside the tenant (user id, API key id), if needed

	// Criticality is the request's criticality class for the layers with
	// Classes ("critical", "sheddable", ...), when Config.Criticality is
	// nil: set it where the identity is verified (an internal service's
	// credential, a batch job's API key), never from the request itself.
	Criticality string

	// Anonymous is set only on the identity bulkhead makes for a request with
	// none when Config.Anonymous is on: Tenant and Subject are then "addr:"
	// followed by the client's address, and Tier is Config.AnonymousTier.
	// WithIdentity clears it: an identity the application verified is never
	// anonymous. The keys of anonymous identities are in a key space no
	// verified identity reaches, whatever a layer's Key makes of them: a
	// tenant named "addr:10.0.0.7" never spends the quota of the anonymous
	// client at 10.0.0.7, nor the other way round. (A verified key that
	// starts with "addr:", or with the byte 0xFF, is counted as 0xFF followed
	// by the key; an anonymous key that does not start with "addr:" as
	// "addr:", 0xFF, then the key. Every other key is counted as it is.)
	Anonymous bool
}

type identityKey struct{}

// WithIdentity returns a copy of ctx carrying id. Call it from the
// authentication middleware after verifying the credential, before the
// bulkhead's Handler:
//
//	r = r.WithContext(bulkhead.WithIdentity(r.Context(), id))
//
// It clears id.Anonymous (see there). Tenant and Subject may hold any bytes,
// braces included; a layer refuses only an empty key, one longer than
// Config.MaxKeyLen, or one its leaves refuse (see Layer.Key).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	id.Anonymous = false
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the Identity in ctx and whether there was one.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// ByTenant is a Layer.Key: the identity's tenant.
func ByTenant(id Identity, _ Request) string { return id.Tenant }

// BySubject is a Layer.Key: the identity's subject.
func BySubject(id Identity, _ Request) string { return id.Subject }

// ClientAddr returns the address of the client that sent r: the peer address
// of the connection (r.RemoteAddr), unless that peer is one of the trusted
// proxies, in which case X-Forwarded-For is read from right to left, skipping
// trusted proxies, and the first address not in trusted is the client. With no
// trusted proxies X-Forwarded-For is ignored: any client can write it, and
// trusting it would let one client spread its requests over invented
// addresses (or charge them to someone else's). It returns the zero Addr if
// RemoteAddr holds no IP address (a Unix socket, a test request).
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	var addr netip.Addr
	if err == nil {
		addr = ap.Addr()
	} else if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		addr = a
	} else {
		return netip.Addr{}
	}
	addr = addr.Unmap()
	if !inPrefixes(addr, trusted) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		line := hops[i]
		for line != "" {
			var hop string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				hop, line = line[j+1:], line[:j]
			} else {
				hop, line = line, ""
			}
			a, err := netip.ParseAddr(strings.TrimSpace(hop))
			if err != nil {
				// A malformed hop: the last proxy we trust is the best we know.
				return addr
			}
			addr = a.Unmap()
			if !inPrefixes(addr, trusted) {
				return addr
			}
		}
	}
	return addr
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
