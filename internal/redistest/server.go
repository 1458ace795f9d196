package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/redis/go-redis/v9"
)

// Server is a private redis-server child process on a loopback port, for tests
// that kill, pause or restart Redis. It is stopped when the test ends, paused or not.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	args []string
	// Addr is host:port; it stays the same across Restart.
	Addr string
	Port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary returns the redis-server to run: $REDIS_SERVER, else redis-server on PATH.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("REDIS_SERVER"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		servertest.Missing(t, "redis-server not found on PATH and REDIS_SERVER not set")
	}
	return bin
}

// Start runs a new redis-server with no persistence on a free loopback port,
// waits until it answers PING, and registers its shutdown with t.Cleanup. Extra
// args are passed to redis-server (for example "--cluster-enabled", "yes").
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), args: args}
	var lastErr error
	for range 5 { // a free port can be taken between probing and binding: retry
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", lastLines(log, 5))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling a child process's readiness, not test synchronisation
	}
	s.kill()
	return fmt.Errorf("redis-server on %s not ready after 10s", s.Addr)
}

func lastLines(b []byte, n int) string {
	end := len(b)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' && i != len(b)-1 {
			n--
			if n == 0 {
				return string(b[i+1 : end])
			}
		}
	}
	return string(b)
}

// Client returns a client for this server with ContextTimeoutEnabled, closed when the
// test ends.
func (s *Server) Client() *redis.Client {
	rdb := redis.NewClient(Options(s.Addr))
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// PID returns the process id of the running server.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Pause stops the server with SIGSTOP: connections stay open and calls hang.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v: %v", sig, err)
	}
}

// Kill SIGKILLs the server and waits for it to exit; its data is gone.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Kill()
	<-exited
}

// Restart kills the server and starts an empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.kill()
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr, err)
}

func (s *Server) stop() { s.kill() }
