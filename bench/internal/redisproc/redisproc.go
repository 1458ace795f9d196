// Package redisproc runs private redis-server children for bench's programs
// (the benchmark report and the fault harness): on a free loopback port,
// without persistence, dying with the program.
package redisproc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary returns the redis-server to run: $REDIS_SERVER, else
// /usr/bin/redis-server, else redis-server on PATH ("" if none).
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	b, _ := exec.LookPath("redis-server")
	return b
}

// Server is a private redis-server child on a loopback port, without
// persistence, that a caller may pause (SIGSTOP), kill and restart empty on
// the same port. It dies with the program (Pdeathsig) if the program is
// killed; Kill stops it otherwise.
type Server struct {
	bin, dir string
	args     []string
	addr     string
	port     int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// Start starts bin on a free loopback port, with args added, and waits
// until it answers PING. Its working directory is dir ("": this process's);
// it writes no data there.
func Start(ctx context.Context, bin, dir string, args ...string) (*Server, error) {
	s := &Server{bin: bin, dir: dir, args: args}
	var err error
	for range 5 { // a free port can be taken between probing and binding
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			return nil, lerr
		}
		s.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(ctx); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// start runs the server on s.port and waits until it answers PING.
func (s *Server) start(ctx context.Context) error {
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no"}
	if s.dir != "" {
		args = append(args, "--dir", s.dir)
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	s.mu.Lock()
	s.log.Reset()
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	s.mu.Unlock()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	rdb := s.Admin()
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			s.mu.Lock()
			out := s.log.String()
			s.mu.Unlock()
			return fmt.Errorf("redis-server on %s exited: %s", s.addr, strings.TrimSpace(out))
		case <-time.After(10 * time.Millisecond): // polling a child's readiness
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Kill()
			return fmt.Errorf("redis-server on %s not ready: %v", s.addr, err)
		}
	}
}

// Addr returns the server's host:port; it stays the same across Restart.
func (s *Server) Addr() string { return s.addr }

// Admin returns a new client that dials the server directly (no retries,
// ContextTimeoutEnabled); the caller closes it.
func (s *Server) Admin() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr, DisableIdentity: true, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Second})
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmd.Process.Signal(sig)
}

// Pause freezes the server (SIGSTOP): connections stay open, calls hang.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Kill SIGKILLs the server and waits for it to exit: its data is gone. It
// may be called more than once.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Kill()
	<-exited
}

// Restart starts an empty server on the same port after Kill.
func (s *Server) Restart(ctx context.Context) error {
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(ctx); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
