package floodgatetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// A Proxy is a TCP proxy on a free loopback port in front of one address (a
// Redis, a database, any TCP server): the client dials [Proxy.Addr] instead
// of the server, and the test puts a fault between them with [Proxy.Freeze],
// [Proxy.Delay], [Proxy.Drop] or [Proxy.Reset], and takes it away with
// [Proxy.Heal]. It needs no root and sends no signal: the server keeps
// running, only the path to it is broken, so other clients of the same
// server are unaffected.
//
// To partition one client from the server (one pod of a fleet), give that
// client a Proxy of its own and freeze or drop it; the other clients dial the
// server directly or through their own proxies.
//
// Bytes are forwarded in order, in chunks of at most 32 KiB, each direction by
// a goroutine of its own; a fault applies to the next chunk each direction
// forwards. A chunk already being written when a fault begins may still
// arrive.
//
// It forwards real sockets in real time, so it is for tests outside a
// testing/synctest bubble. Use [NewProxy] or [StartProxy]; the zero Proxy is
// not usable. A Proxy is safe for concurrent use. Close stops it: after Close
// returns, none of its goroutines is left.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // done at Close: ends dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu sync.Mutex
	// mu guards:
	target  string
	thaw    chan struct{} // nil when not frozen; closed by the end of a freeze
	delay   time.Duration
	dropped bool
	closed  bool
	conns   map[*proxyConn]struct{}
}

// NewProxy starts a Proxy on 127.0.0.1 (a free port) in front of target
// (host:port). It does not dial target until a client connects, so target
// may be down. Call [Proxy.Close] when done.
func NewProxy(target string) (*Proxy, error) {
	if target == "" {
		return nil, errors.New("floodgatetest: NewProxy: empty target")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("floodgatetest: NewProxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// StartProxy is [NewProxy] for a test: it fails the test if the proxy cannot
// start and closes the proxy when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Addr returns the proxy's address (127.0.0.1:port), for the client to dial.
// It stays the same for the proxy's life, whatever the fault.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address new connections are forwarded to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetTarget makes connections accepted from now on go to addr; connections
// already open stay where they are until they end or are reset or dropped.
// With [Proxy.Reset] after it, it stages a failover: every client reconnects,
// to the new server.
func (p *Proxy) SetTarget(addr string) {
	if addr == "" {
		panic("floodgatetest: SetTarget: empty address")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Freeze stops forwarding in both directions, as if the server had stopped
// (SIGSTOP) or the network had gone silent: connections stay open, nothing is
// lost, and new connections are accepted but get no answer. Calls through the
// proxy hang until their own timeout, or until [Proxy.Heal], after which the
// streams continue exactly where they stopped.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thaw == nil {
		p.thaw = make(chan struct{})
	}
}

// Delay makes every chunk wait d before it is forwarded, in each direction,
// so that a request and its reply (one chunk each) take 2d more than without
// the proxy: a slow server or network. Delay(0) removes the delay. A chunk
// already waiting keeps the delay it started with.
func (p *Proxy) Delay(d time.Duration) {
	if d < 0 {
		panic("floodgatetest: Delay: negative duration")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Drop closes every connection and refuses new ones, as a server that went
// away: a new connection is accepted and at once reset, so the client's dial
// or its first read or write fails with "connection reset by peer" (the port
// stays the proxy's, so that [Proxy.Heal] brings the same address back).
func (p *Proxy) Drop() {
	p.mu.Lock()
	p.dropped = true
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		c.kill(false)
	}
}

// Reset resets every open connection once, with a TCP RST to the client
// (connection reset by peer), as a failover or a restarted server does; new
// connections work as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		c.kill(true)
	}
}

// Heal takes every fault away: frozen streams continue, the delay is zero
// and new connections are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
	p.delay = 0
	p.dropped = false
}

// Close stops the proxy: it stops listening, closes every connection and
// returns when all of its goroutines have ended. It returns nil; a second
// Close does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for _, c := range conns {
		c.kill(false)
	}
	p.wg.Wait()
	return nil
}

// takeConnsLocked removes and returns every connection; p.mu must be held.
func (p *Proxy) takeConnsLocked() []*proxyConn {
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	clear(p.conns)
	return conns
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.mu.Lock()
		if p.closed || p.dropped {
			p.mu.Unlock()
			resetConn(client)
			continue
		}
		c := &proxyConn{p: p, client: client, done: make(chan struct{})}
		p.conns[c] = struct{}{}
		target := p.target
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run(target)
	}
}

// resetConn closes conn with an RST rather than a FIN.
func resetConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	done   chan struct{} // closed by kill

	mu sync.Mutex
	// mu guards:
	upstream net.Conn // nil until dialled
	killed   bool
}

// kill closes both connections (the client's with an RST if rst) and ends
// the connection's goroutines; it may be called more than once.
func (c *proxyConn) kill(rst bool) {
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		return
	}
	c.killed = true
	up := c.upstream
	c.mu.Unlock()
	close(c.done)
	if rst {
		resetConn(c.client)
	} else {
		c.client.Close()
	}
	if up != nil {
		up.Close()
	}
}

// forget removes c from the proxy's connections (it ended by itself).
func (c *proxyConn) forget() {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
}

func (c *proxyConn) run(target string) {
	defer c.p.wg.Done()
	defer c.forget()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(c.p.ctx, 10*time.Second)
	up, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		c.kill(true) // the target refused: so does the proxy
		return
	}
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		up.Close()
		return
	}
	c.upstream = up
	c.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { c.pipe(up, c.client) })
	wg.Go(func() { c.pipe(c.client, up) })
	wg.Wait()
	c.kill(false)
}

// pipe copies src to dst chunk by chunk, applying the proxy's faults to each
// chunk. At src's end it half-closes dst and returns; on any error, or when
// the connection is killed, it kills the connection.
func (c *proxyConn) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !c.hold() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.kill(false)
				return
			}
		}
		if err == io.EOF {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
		if err != nil {
			c.kill(false)
			return
		}
	}
}

// hold waits out the proxy's delay and freeze before a chunk is forwarded.
// It returns false if the connection was killed meanwhile.
func (c *proxyConn) hold() bool {
	c.p.mu.Lock()
	d := c.p.delay
	c.p.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	for {
		c.p.mu.Lock()
		thaw := c.p.thaw
		c.p.mu.Unlock()
		if thaw == nil {
			break
		}
		select {
		case <-thaw:
		case <-c.done:
			return false
		}
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}
