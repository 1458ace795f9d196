package redistest

import (
	"syscall"
	"testing"

	"github.com/floodgate-go/floodgate/floodgatetest"
)

// Server is a private redis-server child process on a loopback port, for tests
// that kill, pause or restart Redis: floodgatetest's RedisServer (Addr, Port,
// Client, Kill, Restart, PID), plus Pause and Resume by signal. It is stopped
// when the test ends, paused or not.
type Server struct {
	*floodgatetest.RedisServer
	t testing.TB
}

// Binary returns the redis-server to run: $REDIS_SERVER, else redis-server on PATH.
func Binary(t testing.TB) string {
	t.Helper()
	return floodgatetest.RedisBinary(t)
}

// Start runs a new redis-server with no persistence on a free loopback port,
// waits until it answers PING, and registers its shutdown with t.Cleanup. Extra
// args are passed to redis-server (for example "--cluster-enabled", "yes").
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return &Server{floodgatetest.StartRedis(t, args...), t}
}

// Pause stops the server with SIGSTOP: connections stay open and calls hang,
// for every client. To stall one client's connection only, put a
// floodgatetest.Proxy in front of the server and freeze it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	if err := s.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v: %v", sig, err)
	}
}
