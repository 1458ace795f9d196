package floodgatetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/redis/go-redis/v9"
)

// ServersRequired reports whether a test that needs a missing server fails
// rather than skips: when CI=true or FLOODGATE_REQUIRE_SERVERS=1 is set in the
// environment, so that CI can never silently test nothing.
func ServersRequired() bool { return servertest.Required() }

// Missing ends the test because a server it needs is unavailable: t.Fatalf
// when [ServersRequired], t.Skipf otherwise. why says what is missing and how
// to provide it. Every helper of this package that needs a server calls it;
// call it in your own helpers for the same behaviour.
func Missing(t testing.TB, why string) {
	t.Helper()
	servertest.Missing(t, why)
}

// RedisAddr returns the address of a Redis for the test: REDIS_ADDR if set
// (a server other tests may share: use [KeyPrefix] and never flush it), and
// otherwise a private server of the test's own from [StartRedis]. Without
// either (no REDIS_ADDR, no redis-server binary) it calls [Missing].
func RedisAddr(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	return StartRedis(t).Addr
}

// RedisOptions returns client options for a test's client of the Redis at
// addr: context deadlines bound every call (ContextTimeoutEnabled), the
// handshake sends nothing optional (DisableIdentity), and a dial gives up
// after 2 seconds.
func RedisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		DialTimeout:           2 * time.Second,
	}
}

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// KeyPrefix returns a key prefix unique to this test and run: "ft:", the
// sanitised end of the test's name, a random suffix and a colon. It has no
// glob characters ([]*?\) and no braces, so "{" + prefix + "name}" is a valid
// hash-tagged key. Give your limiters' keys (their Config.Prefix) this prefix
// and delete them at the end with [DeletePrefix].
func KeyPrefix(t testing.TB) string {
	name := unsafeKeyChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	var b [4]byte
	rand.Read(b[:])
	return "ft:" + name + ":" + hex.EncodeToString(b[:]) + ":"
}

// DeletePrefix deletes every key that starts with prefix, or with "{" +
// prefix (hash-tagged keys), with SCAN and UNLINK, and returns the first
// error. It never flushes a database, so tests sharing one Redis may clean up
// in parallel.
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	for _, pattern := range []string{prefix + "*", "{" + prefix + "*"} {
		iter := rdb.Scan(ctx, 0, pattern, 500).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// RedisBinary returns the redis-server to run: $REDIS_SERVER, else
// redis-server on PATH; without either it calls [Missing].
func RedisBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("REDIS_SERVER"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server not found on PATH and REDIS_SERVER not set")
	}
	return bin
}

// A RedisServer is a private redis-server child process of the test, on a
// free loopback port, with no persistence: for tests that kill or restart
// Redis, or that want a server nobody else uses. It is stopped when the test
// ends. Use [StartRedis]; the zero RedisServer is not usable. Its methods are
// safe for concurrent use.
//
// To stall or cut the path to it without stopping it, put a [Proxy] in front
// of Addr.
type RedisServer struct {
	// Addr is the server's host:port; it stays the same across Restart.
	Addr string
	// Port is Addr's port.
	Port int

	t    testing.TB
	bin  string
	dir  string
	args []string

	mu sync.Mutex
	// mu guards:
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRedis runs a new redis-server ([RedisBinary]) with no persistence on a
// free loopback port, waits until it answers PING, and stops it when the test
// ends. Extra args are passed to redis-server (for example "--maxmemory",
// "10mb"). It fails the test if the server does not start within 10 seconds.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, bin: RedisBinary(t), dir: t.TempDir(), args: args}
	var lastErr error
	for range 5 { // a free port can be taken between probing and binding: retry
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.kill)
			return s
		}
	}
	t.Fatalf("floodgatetest: start redis-server: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("floodgatetest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *RedisServer) start() error {
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

// Client returns a client of this server with [RedisOptions], closed when the
// test ends.
func (s *RedisServer) Client() *redis.Client {
	rdb := redis.NewClient(RedisOptions(s.Addr))
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Kill stops the server at once (SIGKILL) and waits for it to exit; its data
// is gone, and clients get connection refused until [RedisServer.Restart].
func (s *RedisServer) Kill() { s.kill() }

func (s *RedisServer) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGCONT) // in case it was stopped
	cmd.Process.Kill()
	<-exited
}

// Restart kills the server and starts an empty one on the same address, as a
// Redis restarted without persistence. It fails the test if the new server
// does not start.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.kill()
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("floodgatetest: restart redis-server on %s: %v", s.Addr, err)
}

// Signal sends sig to the running server process, for tests that need the
// process itself stopped (SIGSTOP, then SIGCONT) rather than one client's path
// to it (a [Proxy]). The server is killed at the end of the test whether
// stopped or not.
func (s *RedisServer) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Signal(sig)
}

// PID returns the process id of the running server.
func (s *RedisServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}
