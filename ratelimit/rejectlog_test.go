package ratelimit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// TestRejectionLogged: a rejection logs one line at log_rejections' level
// with the zone, the caller's partition key (the pk the RateLimit fields
// carry), the rule that refused and the status, never the key (here an API
// key), and marks the request with the zone (throttle_rejected). Before,
// a rejection logged nothing.
func TestRejectionLogged(t *testing.T) {
	const secret = "sk_live_7f3a9c0e1b2d4f6a8c0e2b4d6f8a0c2e"
	for _, tc := range []struct {
		level LogLevel
		want  zapcore.Level
		lines int
	}{{"", zapcore.InfoLevel, 1}, {LogWarn, zapcore.WarnLevel, 1}, {LogDebug, zapcore.DebugLevel, 1}, {LogOff, 0, 0}} {
		t.Run(string(tc.level), func(t *testing.T) {
			name := "rejlog-" + string(tc.level)
			h := provision(t, &Handler{Zones: []*Zone{{Name: name, Key: "{http.request.header.X-Api-Key}", Rate: "2/1h"}}, LogRejections: tc.level}, &fakeClock{ns: int64(time.Hour)})
			logs := observed(h)
			hdr := map[string]string{"X-Api-Key": secret}
			serve(t, h, "192.0.2.1", hdr)
			serve(t, h, "192.0.2.1", hdr)
			res := serve(t, h, "192.0.2.1", hdr)
			if res.passed || res.vars[RejectedVar] != name {
				t.Fatalf("third request: passed %v, %s %v", res.passed, RejectedVar, res.vars[RejectedVar])
			}
			all := logs.All()
			for _, e := range all {
				if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), secret) {
					t.Fatalf("the key appears in a log entry: %+v", e)
				}
			}
			rej := logs.FilterMessage("rejected").All()
			if len(rej) != tc.lines {
				t.Fatalf("%d rejection lines, want %d: %+v", len(rej), tc.lines, all)
			}
			if tc.lines == 0 {
				return
			}
			e := rej[0]
			m := e.ContextMap()
			pk := res.header.Get("RateLimit")
			pk = pk[strings.Index(pk, ";pk=:")+5 : len(pk)-1]
			if e.Level != tc.want || m["zone"] != name || m["pk"] != pk || m["rule"] != "rate 2/1h burst 1" || m["status"] != int64(429) || m["retry_after"] != int64(1800) {
				t.Fatalf("rejection line %v %+v; want level %v, zone, pk %s, rule, status, retry_after", e.Level, m, tc.want, pk)
			}
		})
	}
}

// TestRejectionLogNamesConcurrentRule: a concurrent zone's refusal names
// its rule.
func TestRejectionLogNamesConcurrentRule(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "rejlog-conn", Concurrent: 1}}}, nil)
	logs := observed(h)
	release := make(chan struct{})
	wg := holdRequests(t, h, "192.0.2.1", 1, release)
	serve(t, h, "192.0.2.1", nil)
	close(release)
	wg.Wait()
	rej := logs.FilterMessage("rejected").All()
	if len(rej) != 1 || rej[0].ContextMap()["rule"] != "concurrent 1" {
		t.Fatalf("rejection lines %+v, want one with rule concurrent 1", rej)
	}
}
