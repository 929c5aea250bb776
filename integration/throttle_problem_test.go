package integration

import (
	"encoding/json"
	"testing"
)

// TestThrottleProblemDetails: a rejection is RFC 9457 problem details
// (application/problem+json, the quota-exceeded type of the ratelimit
// headers draft) for a client that accepts them on a server without
// handle_errors; any other client gets Caddy's plain 429, and a server with
// handle_errors keeps its own answer.
func TestThrottleProblemDetails(t *testing.T) {
	site := func(extra string) string {
		return `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone problem {
			key {http.request.header.X-Caller}
			rate 1/1h
		}
	}
	respond "ok"` + extra + `
}`
	}
	c := StartCaddy(t, site(""))
	client := c.Client()
	if resp, body := Get(t, client, c.URL("/"), "X-Caller", "a"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("first request: %d %q", resp.StatusCode, body)
	}
	resp, body := Get(t, client, c.URL("/"), "X-Caller", "a", "Accept", "application/json, application/problem+json;q=0.9")
	if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("problem details: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	var p struct {
		Type, Title string
		Status      int
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" ||
		p.Title != "Request cannot be satisfied as assigned quota has been exceeded" || p.Status != 429 {
		t.Fatalf("problem body %q (%v)", body, err)
	}
	for _, accept := range []string{"", "application/json", "*/*", "application/problem+json;q=0"} {
		resp, body := Get(t, client, c.URL("/"), "X-Caller", "a", "Accept", accept)
		if resp.StatusCode != 429 || body != "" || resp.Header.Get("Content-Type") == "application/problem+json" {
			t.Fatalf("Accept %q: %d %q %v, want Caddy's empty 429", accept, resp.StatusCode, body, resp.Header)
		}
	}

	h := StartCaddy(t, site("\n\thandle_errors {\n\t\trespond \"custom {err.status_code}\" {err.status_code}\n\t}"))
	Get(t, h.Client(), h.URL("/"), "X-Caller", "b")
	resp, body = Get(t, h.Client(), h.URL("/"), "X-Caller", "b", "Accept", "application/problem+json")
	if resp.StatusCode != 429 || body != "custom 429" {
		t.Fatalf("with handle_errors: %d %q, want handle_errors' own answer", resp.StatusCode, body)
	}
}
