package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/syncbuf"
)

// nginxRequireEnv makes a missing nginx fail the tests that compare
// against it instead of skipping them (CI sets it).
const nginxRequireEnv = "EDGEKIT_REQUIRE_NGINX"

// Nginx is one nginx process, in the foreground without workers, on a
// loopback address of its own.
type Nginx struct {
	Addr string // host:port of its one server
	Dir  string
	logs *syncbuf.Buffer
}

// StartNginx starts nginx with http-block directives and one server's
// directives (listen is added), and stops it when the test ends. Without
// nginx on PATH (or in /usr/sbin) the test is skipped, saying how to
// install it, unless EDGEKIT_REQUIRE_NGINX=1.
func StartNginx(t *testing.T, httpBlock, server string) *Nginx {
	t.Helper()
	return StartNginxWith(t, "", httpBlock, server)
}

// StartNginxWith is StartNginx with directives for the main context too
// (load_module).
func StartNginxWith(t *testing.T, main, httpBlock, server string) *Nginx {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			bin, err = "/usr/sbin/nginx", nil
		}
	}
	if err != nil {
		const msg = "nginx not on PATH: apt-get install nginx (or your system's nginx package)"
		if os.Getenv(nginxRequireEnv) == "1" {
			t.Fatalf("%s; %s=1 requires it: %v", msg, nginxRequireEnv, err)
		}
		t.Skipf("%s; skipping (set %s=1 to make this a failure)", msg, nginxRequireEnv)
	}
	host := loopback.Claim(t)
	n := &Nginx{Addr: net.JoinHostPort(host, strconv.Itoa(loopback.FreePort(t, host))), Dir: t.TempDir(), logs: &syncbuf.Buffer{}}
	conf := fmt.Sprintf(`%[5]s
daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events {}
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	default_type text/plain;
	%[2]s
	server {
		listen %[3]s;
		%[4]s
	}
}
`, n.Dir, httpBlock, n.Addr, server, main)
	path := filepath.Join(n.Dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", n.Dir, "-c", path)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("nginx log:\n%s", n.logs.String())
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("nginx exited:\n%s\nconfig:\n%s", n.logs.String(), conf)
		default:
		}
		if conn, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			conn.Close()
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not accept connections on %s:\n%s", n.Addr, n.logs.String())
		}
	}
}

// URL is the plain-HTTP address of path on the nginx.
func (n *Nginx) URL(path string) string { return "http://" + n.Addr + path }
