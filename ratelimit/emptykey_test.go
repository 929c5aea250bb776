package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// observed gives h a logger whose entries the test reads.
func observed(h *Handler) *observer.ObservedLogs {
	core, logs := observer.New(zap.DebugLevel)
	h.logger = zap.New(core)
	return logs
}

// TestEmptyKeyIsNotOneSharedBucket: a zone keyed on a header that a
// request lacks keys that request on the caller's address (on_empty_key
// client_ip, the default), so two callers without the header do not share
// one budget; a caller with it keeps its own. On main, the second caller
// without the header was refused: every such request was one key "".
func TestEmptyKeyIsNotOneSharedBucket(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "empty-fallback", Key: "{http.request.header.X-Api-Key}", Rate: "1/1h"})
	logs := observed(h)
	// The counters are the process's; -count=N runs this N times in one.
	before := testutil.ToFloat64(h.zones[0].counters.empty)
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"} {
		if res := serve(t, h, ip, nil); !res.passed {
			t.Fatalf("caller %s without the header refused (%d): callers without a key share one budget", ip, res.status)
		}
	}
	if res := serve(t, h, "192.0.2.1", nil); res.passed {
		t.Fatal("192.0.2.1 again without the header passed a 1/1h zone: the fallback to its address did not limit it")
	}
	if res := serve(t, h, "192.0.2.1", map[string]string{"X-Api-Key": "k1"}); !res.passed {
		t.Fatal("a caller with its own key was refused")
	}
	if n := testutil.ToFloat64(h.zones[0].counters.empty) - before; n != 4 {
		t.Fatalf("caddy_throttle_empty_keys_total{action=client_ip} = %v, want 4", n)
	}
	if n := logs.FilterMessageSnippet("key expanded to nothing").Len(); n != 1 {
		t.Fatalf("%d warnings about the empty key, want 1 (said once per zone)", n)
	}
}

// TestEmptyKeyTemplate: a template with literal text around its
// placeholders is empty when every placeholder is ("user:" is no key).
func TestEmptyKeyTemplate(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "empty-template", Key: `user:{http.request.header.X-User}/{http.request.cookie.team}\{x\}`, Rate: "1/1h", OnEmptyKey: EmptyKeyDeny})
	if res := serve(t, h, "192.0.2.1", nil); res.passed || res.status != 429 || res.header.Get("Retry-After") != "" {
		t.Fatalf("every placeholder empty, on_empty_key deny: passed %v, %d, Retry-After %q; want 429 without Retry-After", res.passed, res.status, res.header.Get("Retry-After"))
	}
	if res := serve(t, h, "192.0.2.1", map[string]string{"X-User": "a"}); !res.passed {
		t.Fatalf("one placeholder set: refused (%d)", res.status)
	}
}

// TestKeyWithoutPlaceholdersIsShared: a key of literal text alone is one
// budget for every caller on purpose (a limit for the whole site), not an
// empty key: it is never replaced by the caller's address.
func TestKeyWithoutPlaceholdersIsShared(t *testing.T) {
	h := memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, &Zone{Name: "whole-site", Key: "everyone", Rate: "1/1h"})
	if !serve(t, h, "192.0.2.1", nil).passed {
		t.Fatal("first request refused")
	}
	if serve(t, h, "192.0.2.2", nil).passed {
		t.Fatal("a second caller passed a site-wide 1/1h zone: a literal key was taken as empty")
	}
	if n := testutil.ToFloat64(h.zones[0].counters.empty); n != 0 {
		t.Fatalf("empty keys counted: %v", n)
	}
}

// TestEmptyKeyPolicies: skip leaves the request out of the zone (no
// RateLimit member for it), deny refuses it and names the zone; both are
// counted by action.
func TestEmptyKeyPolicies(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	skip := memoryHandler(t, c,
		&Zone{Name: "empty-skip", Key: "{http.request.header.X-Api-Key}", Rate: "1/1h", OnEmptyKey: EmptyKeySkip},
		&Zone{Name: "empty-skip-ip", Rate: "100/1h"})
	emptyBefore := testutil.ToFloat64(skip.zones[0].counters.empty)
	allowedBefore := testutil.ToFloat64(skip.zones[0].counters.allowed)
	for i := range 3 {
		res := serve(t, skip, "192.0.2.1", nil)
		if !res.passed {
			t.Fatalf("skip: request %d refused (%d)", i+1, res.status)
		}
		if got := stripPK(res.header.Get("RateLimit")); !strings.HasPrefix(got, `"empty-skip-ip";r=`) || strings.Contains(got, `"empty-skip"`) {
			t.Fatalf("skip: RateLimit %q, want only the address zone", got)
		}
	}
	if n := testutil.ToFloat64(skip.zones[0].counters.empty) - emptyBefore; n != 3 {
		t.Fatalf("empty_keys_total{action=skip} = %v, want 3", n)
	}
	if n := testutil.ToFloat64(skip.zones[0].counters.allowed) - allowedBefore; n != 0 {
		t.Fatalf("requests_total{decision=allowed} of the skipped zone = %v, want 0 (it decided nothing)", n)
	}
	deny := memoryHandler(t, c, &Zone{Name: "empty-deny", Key: "{http.request.header.X-Api-Key}", Rate: "100/1h", OnEmptyKey: EmptyKeyDeny})
	res := serve(t, deny, "192.0.2.1", nil)
	if res.passed || res.status != 429 || res.vars[RejectedVar] != "empty-deny" {
		t.Fatalf("deny: passed %v, %d, %s %v; want 429 naming the zone", res.passed, res.status, RejectedVar, res.vars[RejectedVar])
	}
	if res := serve(t, deny, "192.0.2.1", map[string]string{"X-Api-Key": "k"}); !res.passed {
		t.Fatal("deny: a request with a key refused")
	}
	obs := provision(t, &Handler{Zones: []*Zone{{Name: "empty-deny-observe", Key: "{http.request.header.X-Api-Key}", Rate: "100/1h", OnEmptyKey: EmptyKeyDeny}}, Mode: ModeObserve}, c)
	if res := serve(t, obs, "192.0.2.1", nil); !res.passed || res.vars[ObservedVar] != "empty-deny-observe" {
		t.Fatalf("deny in observe mode: passed %v, %s %v; want a pass marked observed", res.passed, ObservedVar, res.vars[ObservedVar])
	}
}

// TestEmptyAuthKeyWarnsWithOrderFix: {http.auth.user.id} is empty when
// throttle runs before authentication (its default place): the first such
// request logs the order line that fixes it.
func TestEmptyAuthKeyWarnsWithOrderFix(t *testing.T) {
	h := memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, &Zone{Name: "empty-auth", Key: "{http.auth.user.id}", Rate: "10/1m"})
	logs := observed(h)
	serve(t, h, "192.0.2.1", nil)
	serve(t, h, "192.0.2.1", nil)
	e := logs.FilterMessageSnippet("key expanded to nothing").All()
	if len(e) != 1 || !strings.Contains(e[0].ContextMap()["fix"].(string), "order throttle after basic_auth") {
		t.Fatalf("warnings %+v, want one naming `order throttle after basic_auth`", e)
	}
}

// TestKeyPlaceholdersCheckedAtStart: a placeholder that can have no value
// where throttle runs is refused when the config loads, naming the fix: a
// misspelt http.request. name, and names of the response, the upstream or
// an error; so is one that differs on every request (no caller would ever
// be limited) and the request body (read whole into memory for every
// caller before the limit decides: on main, a key of {http.request.body}
// was taken). Those that may have a value are taken. Asking Caddy's
// replacer about {http.request.duration} or {http.request.uuid} without
// the context Caddy's server gives a request panicked, in Provision.
func TestKeyPlaceholdersCheckedAtStart(t *testing.T) {
	for key, want := range map[string]string{
		"{http.request.headr.X-Api-Key}":              "is not a placeholder Caddy knows",
		"api:{http.request.hedaer.X}":                 "is not a placeholder Caddy knows",
		"{http.request.uri.path.x}":                   "is not a placeholder Caddy knows",
		"{http.response.header.X-User}":               "has a value only after throttle has decided",
		"{http.reverse_proxy.upstream.hostport}":      "has a value only after throttle has decided",
		"{http.error.status_code}":                    "has a value only after throttle has decided",
		"{err.message}":                               "has a value only after throttle has decided",
		"{http.request.uuid}":                         "differs on every request",
		"{http.request.duration_ms}":                  "differs on every request",
		"{http.request.header.X-Api-Key}":             "",
		"{http.request.body}":                         "would read the whole request body",
		"{http.request.body_base64}":                  "would read the whole request body",
		"{http.request.orig_uri.path.1}":              "",
		"{http.request.cookie.session}":               "",
		"{http.request.uri.query.key}":                "",
		"{http.request.remote.host}":                  "",
		"{http.request.tls.client.fingerprint}":       "",
		"{http.request.host.labels.1}":                "",
		"{http.request.uri.path.0}":                   "",
		"{http.auth.user.id}":                         "",
		"{http.vars.tenant}":                          "",
		"{http.request.header.A}:{http.auth.user.id}": "",
	} {
		_, err := checkKey("z", key)
		switch {
		case want == "" && err != nil:
			t.Errorf("key %s refused: %v", key, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("key %s: %v, want an error containing %q", key, err, want)
		}
	}
}
