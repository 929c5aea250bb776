package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The edge lab: what a PoP near the caller buys when the origin is far away,
// and the two settings a PoP gets wrong most easily (caller identity and
// keep-alive idle timeouts). Distances come from the relays in latency.go.

// labPhone is a client that dials from its own loopback address (Linux
// routes all of 127/8 to lo), so each phone is a different caller.
func labPhone(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:        dialer.DialContext,
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2:  true,
			DisableCompression: true,
			Proxy:              nil,
		},
	}
}

// labDo sends a request and returns its status and body; a transport error
// is status 0 with the error as the body.
func labDo(client *http.Client, method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if body == "" {
		req.Body = nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// TestLabPhones: two phones behind one PoP. With client_ip at the origin
// trusting the PoP, the origin's throttle sees each phone and gives each its
// own budget; without it every request seems to come from the PoP, and the
// second phone is refused once the first has spent the shared budget.
func TestLabPhones(t *testing.T) {
	origin := StartCaddy(t, `http://127.0.0.1:{$HTTP_PORT} {
	handle /with-client-ip {
		client_ip {
			trusted_proxies 127.0.0.1
		}
		throttle {
			zone with {
				rate 2/1m
				burst 1
			}
		}
		respond "caller {client_ip}"
	}
	handle /without-client-ip {
		throttle {
			zone without {
				rate 2/1m
				burst 1
			}
		}
		respond "caller {client_ip}"
	}
}`)
	pop := StartCaddy(t, fmt.Sprintf(`http://127.0.0.1:{$HTTP_PORT} {
	reverse_proxy 127.0.0.1:%d
}`, origin.HTTPPort))
	phoneA, phoneB := labPhone("127.0.0.2"), labPhone("127.0.0.3")

	type step struct {
		phone  *http.Client
		name   string
		status int
		body   string
	}
	for _, tc := range []struct {
		path  string
		steps []step
	}{
		{"/with-client-ip", []step{
			{phoneA, "A", 200, "caller 127.0.0.2"},
			{phoneA, "A", 200, "caller 127.0.0.2"},
			{phoneA, "A", 429, ""},
			{phoneB, "B", 200, "caller 127.0.0.3"},
			{phoneB, "B", 200, "caller 127.0.0.3"},
			{phoneB, "B", 429, ""},
		}},
		{"/without-client-ip", []step{
			{phoneA, "A", 200, "caller 127.0.0.1"},
			{phoneA, "A", 200, "caller 127.0.0.1"},
			{phoneB, "B", 429, ""},
			{phoneA, "A", 429, ""},
		}},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			for i, s := range tc.steps {
				status, body := labDo(s.phone, http.MethodGet, pop.URL(tc.path), "")
				if status != s.status || (s.body != "" && body != s.body) {
					t.Fatalf("request %d from phone %s: %d %q, want %d %q", i+1, s.name, status, body, s.status, s.body)
				}
			}
		})
	}
}

// labOrigin is a far origin: a Go server with a known keep-alive idle
// timeout behind a relay that adds oneWay each way. It counts the
// connections it accepts.
type labOrigin struct {
	addr  string // the relay's address: where the PoP dials
	conns atomic.Int64
}

func labStartOrigin(t *testing.T, idleTimeout, oneWay time.Duration) *labOrigin {
	t.Helper()
	o := &labOrigin{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	srv.Config.IdleTimeout = idleTimeout
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	o.addr = StartTCPRelay(t, "127.0.0.1:0", srv.Listener.Addr().String(), oneWay).Addr()
	return o
}

// TestLabIdleTimeout: a PoP keeps idle connections to a far origin. When
// the origin closes one, its FIN needs a one-way delay to reach the PoP;
// a request the PoP sends on that connection meanwhile fails (502), and a
// POST cannot be retried. So the PoP's idle timeout must be shorter than the
// origin's by more than a round trip: then the PoP always closes first.
func TestLabIdleTimeout(t *testing.T) {
	const oneWay = 125 * time.Millisecond // a 250 ms round trip to the origin
	pop := func(t *testing.T, origin *labOrigin, keepalive time.Duration) *Caddy {
		return StartCaddy(t, fmt.Sprintf(`http://127.0.0.1:{$HTTP_PORT} {
	reverse_proxy %s {
		transport http {
			keepalive %s
		}
	}
}`, origin.addr, keepalive))
	}
	// post sends a POST after gap (timed from the previous answer) and
	// reports whether it failed.
	post := func(t *testing.T, c *Caddy, client *http.Client, gap time.Duration) bool {
		time.Sleep(gap)
		status, body := labDo(client, http.MethodPost, c.URL("/form"), "name=value")
		if status != 200 {
			t.Logf("after %v idle: %d %.80q", gap, status, body)
			return true
		}
		return false
	}

	t.Run("pop shorter", func(t *testing.T) {
		const originIdle, popIdle = 1500 * time.Millisecond, time.Second
		origin := labStartOrigin(t, originIdle, oneWay)
		c := pop(t, origin, popIdle)
		client := c.Client()
		gaps := []time.Duration{
			0,
			300 * time.Millisecond,         // reused
			popIdle - 100*time.Millisecond, // reused just before the PoP gives up
			popIdle + 100*time.Millisecond, // the PoP has closed: fresh connection
			originIdle - oneWay,            // where the inverted setting fails
			originIdle + 100*time.Millisecond,
		}
		failed := 0
		for _, gap := range gaps {
			if post(t, c, client, gap) {
				failed++
			}
		}
		if failed != 0 {
			t.Errorf("%d of %d requests failed with the PoP's idle timeout (%v) shorter than the origin's (%v)", failed, len(gaps), popIdle, originIdle)
		}
		if n := origin.conns.Load(); n >= int64(len(gaps)) {
			t.Errorf("the origin accepted %d connections for %d requests: the PoP never reused one", n, len(gaps))
		}
	})

	t.Run("pop longer", func(t *testing.T) {
		const originIdle, popIdle = time.Second, 10 * time.Second
		origin := labStartOrigin(t, originIdle, oneWay)
		c := pop(t, origin, popIdle)
		client := c.Client()
		// The PoP reuses its connection after originIdle - oneWay: the
		// origin has just closed it and the FIN is half way.
		// A failed connection is dropped, so each try first warms a
		// fresh one.
		const tries = 4
		failed := 0
		for range tries {
			post(t, c, client, 0)
			if post(t, c, client, originIdle-oneWay) {
				failed++
			}
		}
		t.Logf("%d of %d requests failed with the PoP's idle timeout (%v) longer than the origin's (%v)", failed, tries, popIdle, originIdle)
		if failed < tries/2 {
			t.Errorf("only %d of %d requests in the race window failed: the failure mode did not show", failed, tries)
		}
	})
}
