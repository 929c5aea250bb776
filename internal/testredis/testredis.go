// Package testredis starts a real redis-server for tests, on a loopback
// address of the test's own (see package loopback), and stops it when the
// test ends.
//
// Without redis-server on PATH the test is skipped, saying how to install it;
// with EDGEKIT_REQUIRE_REDIS=1 (CI sets it) a missing redis-server fails the
// test instead, so CI never passes by skipping.
package testredis

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/syncbuf"
)

// RequireEnv is the environment variable under which a missing redis-server
// fails the tests that need it instead of skipping them.
const RequireEnv = "EDGEKIT_REQUIRE_REDIS"

// Server is one redis-server process. Stop and Restart let a test take Redis
// away and bring it back on the same address.
type Server struct {
	t    testing.TB
	addr string
	args []string
	tls  bool // listens with TLS only, on addr's port

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server with args added to its command line (e.g.
// "--requirepass", "secret") and returns it once it accepts connections.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := Binary(t)
	host := loopback.Claim(t)
	return startOn(t, bin, net.JoinHostPort(host, strconv.Itoa(loopback.FreePort(t, host))), false, args)
}

// startOn starts redis-server listening on addr (TLS only, --port 0, if
// tls), stopped when t ends.
func startOn(t testing.TB, bin, addr string, tls bool, args []string) *Server {
	t.Helper()
	s := &Server{t: t, addr: addr, args: args, tls: tls}
	s.start(bin)
	t.Cleanup(s.Stop)
	return s
}

// Binary returns redis-server's path, or skips t (fails it under
// EDGEKIT_REQUIRE_REDIS=1) when it is not on PATH.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin
	}
	const msg = "redis-server not on PATH: apt-get install redis-server (or your system's redis package)"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s; %s=1 requires it: %v", msg, RequireEnv, err)
	}
	t.Skipf("%s; skipping (set %s=1 to make this a failure)", msg, RequireEnv)
	return ""
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Cmd is the running process (nil while stopped), for tests that signal it,
// e.g. SIGSTOP for a Redis that accepts but never answers.
func (s *Server) Cmd() *exec.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd
}

// Restart starts a stopped server again on the same address, with the same
// arguments (the data is gone: it runs without persistence).
func (s *Server) Restart() {
	s.t.Helper()
	s.start(Binary(s.t))
}

func (s *Server) start(bin string) {
	s.t.Helper()
	host, port, _ := net.SplitHostPort(s.addr)
	args := []string{"--port", port}
	if s.tls {
		args = []string{"--port", "0", "--tls-port", port}
	}
	args = append(append(args, "--bind", host, "--save", "", "--appendonly", "no"), s.args...)
	cmd := exec.Command(bin, args...)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatalf("testredis: %s already running", s.addr)
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("testredis: starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	// The address is this test's alone, so whatever answers on it is this
	// redis-server; it exiting first means it could not listen.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			s.t.Fatalf("testredis: redis-server %s exited before listening on %s:\n%s", strings.Join(args, " "), s.addr, logs)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			c.Close()
			return
		}
	}
	s.t.Fatalf("testredis: redis-server not listening on %s after 10s:\n%s", s.addr, logs)
}

// Stop kills the server and waits for it to exit; a stopped server may be
// restarted.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Logf("testredis: killing redis-server: %v", err)
	}
	<-done
}
