package integration

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleRedisHangupsKeepBreakerClosed: clients that send a request
// and hang up at once are no Redis failure. Were they counted, three in a
// row would open the breaker every handler of that Redis shares: a caller
// already at 429 would pass again (on_error allow) and everyone would get
// 503 (on_error deny).
func TestThrottleRedisHangupsKeepBreakerClosed(t *testing.T) {
	rs := testredis.Start(t)
	route := func(path, onError string) string {
		return `
	handle ` + path + ` {
		throttle {
			zone hangup` + onError + ` {
				key {http.request.header.X-Caller}
				rate 1/1h
			}
			store redis {
				address ` + rs.Addr() + `
				# A hang-up counted as a failure would fail at once,
				# whatever the timeout; a generous one keeps a loaded
				# machine from adding real timeouts to the count.
				timeout 3s
				on_error ` + onError + `
			}
		}
		respond "ok"
	}`
	}
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {`+route("/allow", "allow")+route("/deny", "deny")+`
}`)
	client := c.Client()
	get := func(path, caller string) int {
		req, _ := http.NewRequest(http.MethodGet, c.URL(path), nil)
		req.Header.Set("X-Caller", caller)
		resp, _ := Do(t, client, req)
		return resp.StatusCode
	}
	if s := get("/allow", "limited"); s != 200 {
		t.Fatalf("limited caller's first request: %d, want 200", s)
	}
	if s := get("/allow", "limited"); s != 429 {
		t.Fatalf("limited caller's second request: %d, want 429", s)
	}
	u, err := url.Parse(c.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	hangup := func(path, caller string) {
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		_, err = conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Caller: " + caller + "\r\n\r\n"))
		if err != nil {
			t.Error(err)
		}
		conn.Close()
	}
	const rounds, perRound = 10, 30
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range perRound {
			path := "/allow"
			if i%2 == 1 {
				path = "/deny"
			}
			wg.Go(func() { hangup(path, "hangup-"+strconv.Itoa(round)+"-"+strconv.Itoa(i)) })
		}
		wg.Wait()
		// Let Caddy decide the hung-up requests; the breaker, once open,
		// stays open for a second, so this look is well inside it.
		time.Sleep(100 * time.Millisecond)
		if s := get("/allow", "limited"); s != 429 {
			t.Fatalf("round %d, after %d clients hung up: limited caller got %d, want 429 (on_error allow: the breaker opened)", round, perRound, s)
		}
		if s := get("/deny", "fresh-"+strconv.Itoa(round)); s != 200 {
			t.Fatalf("round %d, after %d clients hung up: a fresh caller got %d, want 200 (on_error deny: the breaker opened)", round, perRound, s)
		}
	}
	if v, ok := metricValue(c.Metrics(), "caddy_throttle_store_errors_total"); ok && v != "0" {
		t.Fatalf("clients hanging up were counted as store errors: caddy_throttle_store_errors_total %s", v)
	}
}

// redisInline sends inline commands to a Redis and returns its first n
// reply lines.
func redisInline(t testing.TB, addr string, n int, commands ...string) []string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(strings.Join(commands, "\r\n") + "\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var lines []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading Redis's answer to %q: %v (so far %q)", commands, err, lines)
		}
		lines = append(lines, strings.TrimRight(line, "\r\n"))
	}
	return lines
}

// TestThrottleRedisPlaceholders: the README's `password {env.REDIS_PASSWORD}`
// reaches Redis as the variable's value, and so do placeholders in address,
// username and key_prefix. An unset one is refused at load, naming the
// field, instead of sending the braces and limiting nothing.
func TestThrottleRedisPlaceholders(t *testing.T) {
	const password = "s3cret-for-test"
	addr := testredis.Start(t, "--requirepass", password).Addr()
	c := StartCaddyWith(t, Options{Env: []string{
		"REDIS_ADDR=" + addr,
		"REDIS_USER=default",
		"REDIS_PASSWORD=" + password,
		"REDIS_PREFIX=edge-env",
	}}, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone env_auth {
			rate 1/1h
		}
		store redis {
			address {env.REDIS_ADDR}
			username {env.REDIS_USER}
			password {env.REDIS_PASSWORD}
			key_prefix {env.REDIS_PREFIX}:
			timeout 1s
			on_error allow
		}
	}
	respond "ok"
}`)
	client := c.Client()
	if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 200 {
		t.Fatalf("first request: %d, want 200", resp.StatusCode)
	}
	if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 429 {
		t.Fatalf("second request: %d, want 429 (on_error allow hides a Redis that refused the password)\n%s",
			resp.StatusCode, grepLines(c.Logs(), "rate limit store"))
	}
	// +OK to AUTH, then KEYS' array: *1, $<length>, the key.
	reply := redisInline(t, addr, 4, "AUTH "+password, "KEYS *")
	if reply[0] != "+OK" || reply[1] != "*1" || !strings.HasPrefix(reply[3], "edge-env:{") || !strings.Contains(reply[3], "}:env_auth:") {
		t.Fatalf("Redis answered %q, want one key with the prefix from REDIS_PREFIX, edge-env:{<tag>}:env_auth:", reply)
	}

	for _, field := range []string{"address", "username", "password", "key_prefix"} {
		status, body := c.Load(`http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone env_auth {
			rate 1/1h
		}
		store redis {
			address {env.REDIS_ADDR}
			` + field + ` {env.EDGEKIT_TEST_UNSET}
		}
	}
	respond "ok"
}`)
		if status == 200 || !strings.Contains(body, field) || !strings.Contains(body, "{env.EDGEKIT_TEST_UNSET}") {
			t.Fatalf("%s with an unset placeholder: %d %q, want a refusal naming the field and the placeholder", field, status, body)
		}
	}
	if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 429 {
		t.Fatalf("after refused loads: %d, want the running config still limiting (429)", resp.StatusCode)
	}
}

// TestThrottleRedisHungServerBounded: against a server that accepts and
// never answers, with timeout 100ms, no request waits much longer than the
// timeout, however many arrive together while the client connects.
func TestThrottleRedisHungServerBounded(t *testing.T) {
	addr := testredis.Hung(t, "127.0.0.1:0")
	route := func(path, onError string) string {
		return `
	handle ` + path + ` {
		throttle {
			zone hung` + onError + ` {
				rate 1/1h
			}
			store redis {
				address ` + addr + `
				timeout 100ms
				on_error ` + onError + `
			}
		}
		respond "ok"
	}`
	}
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {`+route("/allow", "allow")+route("/deny", "deny")+`
}`)
	want := map[string]int{"/allow": 200, "/deny": 503}
	for round := range 2 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var slowest time.Duration
		for i := range 30 {
			path := "/allow"
			if i%2 == 1 {
				path = "/deny"
			}
			wg.Go(func() {
				client := c.Client() // a connection of its own: all 30 arrive together
				start := time.Now()
				resp, _ := Get(t, client, c.URL(path))
				took := time.Since(start)
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
				if resp.StatusCode != want[path] {
					t.Errorf("round %d %s: %d, want %d", round, path, resp.StatusCode, want[path])
				}
				if took > time.Second {
					t.Errorf("round %d %s took %v with timeout 100ms", round, path, took)
				}
			})
		}
		wg.Wait()
		t.Logf("round %d: slowest of 30 concurrent requests against a hung server: %v", round, slowest)
		if t.Failed() {
			return
		}
		// The breaker is open now; the next round starts when it lets a
		// probe through again, with a connect attempt maybe still running.
		time.Sleep(1100 * time.Millisecond)
	}
}
