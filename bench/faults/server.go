package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBinary returns the redis-server to run: $REDIS_SERVER, else
// /usr/bin/redis-server, else redis-server on PATH ("" if none).
func redisBinary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	b, _ := exec.LookPath("redis-server")
	return b
}

// server is a private redis-server child on a loopback port, without
// persistence, that a scenario pauses (SIGSTOP), kills and restarts empty on
// the same port. It dies with the program (Pdeathsig) if the program is
// killed.
type server struct {
	bin, dir string
	args     []string
	addr     string
	port     int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// startServer starts a redis-server on a free port with args added.
func startServer(ctx context.Context, bin, dir string, args ...string) (*server, error) {
	s := &server{bin: bin, dir: dir, args: args}
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
func (s *server) start(ctx context.Context) error {
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no"}, s.args...)
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
	rdb := s.admin()
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
			s.kill()
			return fmt.Errorf("redis-server on %s not ready: %v", s.addr, err)
		}
	}
}

// admin returns a client that dials the server directly, for the harness's
// own commands (never through a fault).
func (s *server) admin() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr, DisableIdentity: true, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Second})
}

func (s *server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmd.Process.Signal(sig)
}

// pause freezes the server (SIGSTOP): connections stay open, calls hang.
func (s *server) pause() { s.signal(syscall.SIGSTOP) }

// resume continues a paused server.
func (s *server) resume() { s.signal(syscall.SIGCONT) }

// kill SIGKILLs the server and waits for it to exit: its data is gone.
func (s *server) kill() {
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

// restart starts an empty server on the same port after kill.
func (s *server) restart(ctx context.Context) error {
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(ctx); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// dirFor makes a directory for a server of a scenario under root.
func dirFor(root, name string) (string, error) {
	d := filepath.Join(root, name)
	return d, os.MkdirAll(d, 0o755)
}
