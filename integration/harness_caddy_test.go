// Package integration runs edgekit end to end: a real Caddy process, built
// from ./cmd/caddy once per test run, in front of real origins on loopback.
// caddytest is not used because it always binds the admin endpoint on :2999,
// which would serialise every package's tests.
//
// Each Caddy listens on a loopback address of its own (127.a.b.c, claimed
// through internal/loopback so that no other test of any process on the
// machine uses it meanwhile): Caddy binds with SO_REUSEPORT, and two
// processes listening on one address and port would silently share its
// connections. A test writes its site blocks as
//
//	http://{$HOST}:{$HTTP_PORT} {
//	https://localhost:{$HTTPS_PORT} {
//
// and builds URLs with c.URL and c.HTTPSURL; c.Client and c.H3Client dial
// the Caddy's address for localhost. The harness adds a global options block
// (default_bind and admin on that address, storage in the test's own
// directory, local certificates) and starts Caddy with its own HOME and XDG
// directories, so nothing leaks between tests or into the user's account.
// Clients connecting to the address come from 127.0.0.1 (the loopback
// route's source), which is the peer address Caddy sees.
package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/syncbuf"
)

// caddyBinary is the path of the Caddy built by TestMain.
var caddyBinary string

// BuildCaddy builds ./cmd/caddy into dir and returns the binary's path. With
// race set it is built with the race detector, so end-to-end tests also catch
// data races inside the modules.
func BuildCaddy(dir string, race bool) (string, error) {
	return BuildCaddyPackage(dir, "./cmd/caddy", "caddy", race)
}

// BuildCaddyPackage is BuildCaddy for another main package of the module
// (such as integration/internal/testcaddy, Caddy with test-only modules),
// built into dir as name.
func BuildCaddyPackage(dir, pkg, name string, race bool) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Options adjust a Caddy started by StartCaddyWith.
type Options struct {
	// Global is inserted into the global options block.
	Global string
	// Env is added to Caddy's environment (KEY=VALUE).
	Env []string
	// Binary is the Caddy to run; default the one TestMain built from
	// ./cmd/caddy.
	Binary string
}

// Caddy is one running Caddy process.
type Caddy struct {
	// Host is the loopback address Caddy listens on ($HOST), its own.
	Host                           string
	HTTPPort, HTTPSPort, AdminPort int
	// Dir is the process's own directory (HOME, storage, Caddyfile).
	Dir string

	opts Options
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
	done chan struct{}
}

// StartCaddy starts Caddy with the given site blocks.
func StartCaddy(t testing.TB, caddyfile string) *Caddy {
	t.Helper()
	return StartCaddyWith(t, Options{}, caddyfile)
}

// StartCaddyWith starts Caddy with the given options and site blocks, waits
// until its config is loaded and its listeners answer, and stops it when the
// test ends (printing its log if the test failed).
func StartCaddyWith(t testing.TB, opts Options, caddyfile string) *Caddy {
	t.Helper()
	if caddyBinary == "" && opts.Binary == "" {
		t.Fatal("integration: caddy binary not built (TestMain must call BuildCaddy)")
	}
	host := loopback.Claim(t)
	return startCaddyOn(t, opts, host, func() ports { return freePorts(t, host) }, caddyfile)
}

// ports are a Caddy's HTTP, HTTPS and admin ports.
type ports struct{ http, https, admin int }

// freePorts picks a Caddy's three ports on host, distinct.
func freePorts(t testing.TB, host string) ports {
	t.Helper()
	p := loopback.FreePorts(t, host, 3)
	return ports{p[0], p[1], p[2]}
}

// startCaddyOn is StartCaddyWith on host, with ports from pick.
func startCaddyOn(t testing.TB, opts Options, host string, pick func() ports, caddyfile string) *Caddy {
	t.Helper()
	// The address is the test's own, but a listener on the wildcard address
	// (another program's) can take a port found free before Caddy binds it:
	// then try again with other ports.
	for attempt := 1; ; attempt++ {
		c := startCaddyProcess(t, opts, host, pick(), caddyfile)
		err := c.waitReady(caddyfile)
		if err != nil && attempt < 3 && strings.Contains(c.Logs(), "address already in use") {
			c.Stop()
			continue
		}
		t.Cleanup(func() {
			c.Stop()
			if t.Failed() {
				t.Logf("caddy log:\n%s", c.Logs())
			}
		})
		if err != nil {
			t.Fatalf("caddy did not start: %v\nlog:\n%s", err, c.Logs())
		}
		return c
	}
}

// startCaddyProcess starts Caddy on host and p, in a directory of its own,
// without waiting for it to be ready.
func startCaddyProcess(t testing.TB, opts Options, host string, p ports, caddyfile string) *Caddy {
	t.Helper()
	c := &Caddy{
		Host:      host,
		HTTPPort:  p.http,
		HTTPSPort: p.https,
		AdminPort: p.admin,
		Dir:       t.TempDir(),
		opts:      opts,
		logs:      &syncbuf.Buffer{},
		done:      make(chan struct{}),
	}
	path := filepath.Join(c.Dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(c.withGlobals(caddyfile)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := caddyBinary
	if opts.Binary != "" {
		bin = opts.Binary
	}
	c.cmd = exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	c.cmd.Dir = c.Dir
	c.cmd.Env = append(c.env(), opts.Env...)
	c.cmd.Stdout = c.logs
	c.cmd.Stderr = c.logs
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting caddy: %v", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c
}

func (c *Caddy) env() []string {
	env := []string{
		"HOME=" + c.Dir,
		"XDG_DATA_HOME=" + filepath.Join(c.Dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(c.Dir, "config"),
		"PATH=" + os.Getenv("PATH"),
		"HOST=" + c.Host,
		"HTTP_PORT=" + strconv.Itoa(c.HTTPPort),
		"HTTPS_PORT=" + strconv.Itoa(c.HTTPSPort),
		"ADMIN_PORT=" + strconv.Itoa(c.AdminPort),
	}
	if gorace := os.Getenv("GORACE"); gorace != "" {
		env = append(env, "GORACE="+gorace)
	}
	return env
}

// withGlobals prepends the harness's global options block. default_bind
// makes every site listen on $HOST (TCP, and UDP for HTTP/3; the automatic
// HTTP->HTTPS redirects follow their site's address). The admin endpoint
// accepts only its Host names; for a loopback address other than 127.0.0.1
// those are localhost, ::1 and 127.0.0.1, so origins names $HOST.
func (c *Caddy) withGlobals(sites string) string {
	return fmt.Sprintf(`{
	admin {$HOST}:{$ADMIN_PORT} {
		origins {$HOST}:{$ADMIN_PORT} localhost:{$ADMIN_PORT}
	}
	default_bind {$HOST}
	http_port {$HTTP_PORT}
	https_port {$HTTPS_PORT}
	persist_config off
	skip_install_trust
	local_certs
	grace_period 2s
	storage file_system %s
	%s
}

%s
`, filepath.Join(c.Dir, "storage"), c.opts.Global, sites)
}

// waitReady waits until the admin endpoint has a config and every port the
// site blocks name accepts connections.
func (c *Caddy) waitReady(sites string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-c.done:
			return fmt.Errorf("caddy exited")
		default:
		}
		resp, err := http.Get(c.AdminURL("/config/"))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(body)) != "null" {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("admin endpoint %s has no config after 60s", c.AdminURL("/"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, port := range []struct {
		name string
		port int
	}{{"{$HTTP_PORT}", c.HTTPPort}, {"{$HTTPS_PORT}", c.HTTPSPort}} {
		if !strings.Contains(sites, port.name) {
			continue
		}
		for {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.Host, strconv.Itoa(port.port)), time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("port %d (%s) does not accept connections", port.port, port.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Stop ends the process: SIGTERM, then SIGKILL after a few seconds.
func (c *Caddy) Stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// URL is the plain-HTTP address of path on the Caddy's own address.
func (c *Caddy) URL(path string) string {
	return fmt.Sprintf("http://%s%s", c.HTTPAddr(), path)
}

// HTTPAddr is host:port of the plain-HTTP listener, e.g. for a reverse_proxy
// upstream.
func (c *Caddy) HTTPAddr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.HTTPPort))
}

// HTTPSAddr is host:port of the HTTPS (and HTTP/3) listener.
func (c *Caddy) HTTPSAddr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.HTTPSPort))
}

// HTTPSURL is the HTTPS address of path on localhost, the name the site
// blocks and certificates use; c.Client and c.H3Client dial c.Host for it.
func (c *Caddy) HTTPSURL(path string) string {
	return fmt.Sprintf("https://localhost:%d%s", c.HTTPSPort, path)
}

// AdminURL is the admin endpoint's address of path.
func (c *Caddy) AdminURL(path string) string {
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(c.Host, strconv.Itoa(c.AdminPort)), path)
}

// dialAddr is where a client of this Caddy connects for addr: localhost is
// this Caddy's own address, anything else is dialled as it is.
func (c *Caddy) dialAddr(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
		return net.JoinHostPort(c.Host, port)
	}
	return addr
}

// Client speaks HTTP/1.1 and HTTP/2 and trusts any certificate; it reaches
// localhost on the Caddy's address, with SNI localhost. It does not add
// Accept-Encoding on its own nor decode bodies: tests set what they mean.
func (c *Caddy) Client() *http.Client { return c.client(&net.Dialer{Timeout: 10 * time.Second}) }

// ClientFrom is Client dialling from the loopback address ip (Linux routes
// all of 127/8 to lo), so that each client is a caller of its own.
func (c *Caddy) ClientFrom(t testing.TB, ip string) *http.Client {
	cl := c.client(&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second})
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

func (c *Caddy) client(dialer *net.Dialer) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, c.dialAddr(addr))
			},
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2:  true,
			DisableCompression: true,
			Proxy:              nil,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// H3Client speaks HTTP/3 through quic-go and trusts any certificate; like
// Client it reaches localhost on the Caddy's address.
func (c *Caddy) H3Client() *http.Client {
	return c.h3Client(func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
		return quic.DialAddrEarly(ctx, addr, tlsCfg, cfg)
	})
}

// H3ClientFrom is H3Client sending from the loopback address ip.
func (c *Caddy) H3ClientFrom(t testing.TB, ip string) *http.Client {
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	qt := &quic.Transport{Conn: udp}
	cl := c.h3Client(func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
		raddr, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return nil, err
		}
		return qt.DialEarly(ctx, raddr, tlsCfg, cfg)
	})
	t.Cleanup(func() { cl.Transport.(*http3.Transport).Close(); qt.Close() })
	return cl
}

// h3Client dials with dial, given the Caddy's address for localhost.
func (c *Caddy) h3Client(dial func(context.Context, string, *tls.Config, *quic.Config) (*quic.Conn, error)) *http.Client {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}},
		// The transport has set tlsCfg.ServerName from the URL already.
		Dial: func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return dial(ctx, c.dialAddr(addr), tlsCfg, cfg)
		},
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// WaitHTTPS waits until the internal certificate is issued and HTTPS answers
// (Caddy issues it asynchronously after start).
func (c *Caddy) WaitHTTPS(t testing.TB) {
	t.Helper()
	client := c.Client()
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(c.HTTPSURL("/"))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return
		}
		lastErr = err
	}
	t.Fatalf("HTTPS on port %d never answered: %v", c.HTTPSPort, lastErr)
}

// Load replaces the running config with these site blocks through the admin
// API's /load, as an operator's reload does, and returns the answer.
func (c *Caddy) Load(sites string) (status int, body string) {
	req, _ := http.NewRequest(http.MethodPost, c.AdminURL("/load"), strings.NewReader(c.withGlobals(sites)))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		// Caddy answers once the old servers' shutdowns were scheduled,
		// not once their sockets closed; the kernel spreads connections
		// over the old and new SO_REUSEPORT sockets meanwhile, and one
		// queued on an old socket is dropped when it closes (the client
		// sees EOF). Give the handover a moment.
		time.Sleep(250 * time.Millisecond)
	}
	return resp.StatusCode, string(b)
}

// Metrics returns the admin endpoint's Prometheus text; on a failure it
// returns a line saying so, which no metric a test looks for matches and
// which the test's failure message then shows.
func (c *Caddy) Metrics() string {
	resp, err := http.Get(c.AdminURL("/metrics"))
	if err != nil {
		return "# harness: GET /metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || err != nil {
		return fmt.Sprintf("# harness: GET /metrics: status %d (read error %v): %.200s", resp.StatusCode, err, b)
	}
	return string(b)
}

// metricValue returns the value of the series (name{labels}, exactly as
// Caddy exports it) in Prometheus text, and whether it is there.
func metricValue(text, series string) (string, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			return value, true
		}
	}
	return "", false
}

// counterValue is metricValue as a number, failing the test when the series
// is absent.
func counterValue(t *testing.T, text, series string) float64 {
	t.Helper()
	value, ok := metricValue(text, series)
	if !ok {
		t.Fatalf("no series %s in the metrics:\n%s", series, grepLines(text, strings.SplitN(series, "{", 2)[0]))
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		t.Fatalf("%s %s: %v", series, value, err)
	}
	return v
}

// Logs returns everything Caddy wrote to stdout and stderr so far.
func (c *Caddy) Logs() string { return c.logs.String() }

// grepLines returns the lines of text that contain substr, to show the
// relevant part of Logs or Metrics in a failure.
func grepLines(text, substr string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// FreePort returns a port that was free a moment ago for TCP and UDP on
// every interface (Caddy binds site ports on all of them, and its HTTP/3
// listens on the HTTPS port). It is chosen below the kernel's ephemeral
// range, so that the outgoing connections tests make meanwhile cannot take
// it before Caddy binds it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := 20000, ephemeralLow()
	for range 200 {
		port := 0 // the kernel's choice, if the range leaves no room below
		if hi-lo >= 1000 {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return port
	}
	t.Fatal("no free port")
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 32768
}

// Origin serves handler on 127.0.0.1 until the test ends and returns its
// host:port, for use as a reverse_proxy upstream.
func Origin(t testing.TB, handler http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Echo is what EchoOrigin answers: what the origin received.
type Echo struct {
	RemoteAddr string              `json:"remote_addr"`
	Method     string              `json:"method"`
	URI        string              `json:"uri"`
	Proto      string              `json:"proto"`
	Headers    map[string][]string `json:"headers"`
}

// EchoOrigin starts an origin that answers, as JSON, what it received.
func EchoOrigin(t testing.TB) string {
	t.Helper()
	return Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Echo{
			RemoteAddr: r.RemoteAddr,
			Method:     r.Method,
			URI:        r.RequestURI,
			Proto:      r.Proto,
			Headers:    r.Header,
		})
	}))
}

// Do sends req and returns the response with its body read and closed,
// failing the test if the request or the body fails.
func Do(t testing.TB, client *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, string(body)
}

// Get is Do for a GET of url, with headers in name, value pairs.
func Get(t testing.TB, client *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return Do(t, client, req)
}

// GetEcho sends req and decodes an EchoOrigin answer, failing the test on any
// status but 200. It also returns the protocol the client spoke.
func GetEcho(t testing.TB, client *http.Client, req *http.Request) (Echo, string) {
	t.Helper()
	resp, body := Do(t, client, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", req.Method, req.URL, resp.StatusCode, body)
	}
	var e Echo
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("decoding echo %q: %v", body, err)
	}
	return e, resp.Proto
}

// WaitFor polls cond every 20ms until it holds or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
