package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestClientIPWhatStillSeesThePeer: after client_ip resolved the caller,
// the client_ip matcher, {client_ip} and the access log's
// request.client_ip are the caller, while the remote_ip matcher,
// {remote_host} and the access log's request.remote_ip are still the TCP
// peer. A request believed through the edge also has its
// X-Forwarded-Proto and X-Forwarded-Host kept by reverse_proxy; one that is
// not gets them afresh.
func TestClientIPWhatStillSeesThePeer(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	log
	client_ip {
		trusted_proxies 127.0.0.1 10.0.0.0/8
		recursive
	}
	@peer remote_ip 127.0.0.1
	@caller client_ip 203.0.113.0/24
	request_header @peer X-Matched-Remote-Ip yes
	request_header @caller X-Matched-Client-Ip yes
	request_header X-Seen "{remote_host} {client_ip}"
	reverse_proxy `+origin+`
}`)
	for _, tc := range []struct {
		path, xff                    string
		viaEdge                      bool
		wantClient, wantHost, wantPr string
	}{
		{"/edge", "203.0.113.7, 10.1.1.1", true, "203.0.113.7", "shop.example", "https"},
		{"/not-edge", "10.1.1.1", false, "127.0.0.1", c.HTTPAddr(), "http"},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.URL(tc.path), nil)
		req.Header.Set("X-Forwarded-For", tc.xff)
		req.Header.Set("X-Forwarded-Host", "shop.example")
		req.Header.Set("X-Forwarded-Proto", "https")
		echo, _ := GetEcho(t, c.Client(), req)
		h := http.Header(echo.Headers)
		if got := h.Get("X-Seen"); got != "127.0.0.1 "+tc.wantClient {
			t.Errorf("%s: {remote_host} {client_ip} = %q, want the peer then %s", tc.path, got, tc.wantClient)
		}
		if h.Get("X-Matched-Remote-Ip") != "yes" {
			t.Errorf("%s: remote_ip 127.0.0.1 did not match the peer", tc.path)
		}
		if (h.Get("X-Matched-Client-Ip") == "yes") != tc.viaEdge {
			t.Errorf("%s: client_ip matcher %q, want a match only through the edge", tc.path, h.Get("X-Matched-Client-Ip"))
		}
		if h.Get("X-Forwarded-Host") != tc.wantHost || h.Get("X-Forwarded-Proto") != tc.wantPr {
			t.Errorf("%s: X-Forwarded-Host %q -Proto %q upstream, want %q %q", tc.path, h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"), tc.wantHost, tc.wantPr)
		}
		var entry struct {
			Request struct {
				RemoteIP string `json:"remote_ip"`
				ClientIP string `json:"client_ip"`
			} `json:"request"`
		}
		clientIPAccessLogEntry(t, c, tc.path) // waits for the line
		for line := range strings.SplitSeq(c.Logs(), "\n") {
			if strings.Contains(line, `"logger":"http.log.access`) && strings.Contains(line, `"uri":"`+tc.path+`"`) {
				if err := json.Unmarshal([]byte(line), &entry); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				break
			}
		}
		if entry.Request.RemoteIP != "127.0.0.1" || entry.Request.ClientIP != tc.wantClient {
			t.Errorf("%s: access log remote_ip %q client_ip %q, want 127.0.0.1 and %s", tc.path, entry.Request.RemoteIP, entry.Request.ClientIP, tc.wantClient)
		}
	}
}
