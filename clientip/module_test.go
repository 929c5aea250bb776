package clientip

import (
	"slices"
	"strings"
	"testing"
)

func TestValidateRefuses(t *testing.T) {
	t.Setenv("CLIENTIP_TEST_EMPTY", "")
	t.Setenv("CLIENTIP_TEST_SET", "s3cret")
	for _, tc := range []struct{ config, want string }{
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":0}`, "hops 0: must be 1..16 (number of proxy layers in front of Caddy)"},
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":17}`, "hops 17: must be 1..16"},
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":-1}`, "hops -1: must be 1..16"},
		{`{}`, "nothing verifies the edge: set trusted_proxies"},
		{`{"hops":2}`, "nothing verifies the edge"},
		{`{"trusted_proxies":[]}`, "trusted_proxies is empty"},
		{`{"trusted_proxies":["0.0.0.0/0"]}`, "covers every IPv4 address"},
		{`{"trusted_proxies":["10.0.0.0/8","::/0"]}`, "covers every IPv6 address"},
		{`{"trusted_proxies":["0.0.0.0/1","128.0.0.0/2","192.0.0.0/2"]}`, "covers every IPv4 address"},
		{`{"trusted_proxies":["::ffff:0.0.0.0/96"]}`, "covers every IPv4 address"},
		{`{"trusted_proxies":["::/1","8000::/1"]}`, "covers every IPv6 address"},
		{`{"trusted_proxies":["10.0.0.0/33"]}`, "trusted_proxies: parsing CIDR expression"},
		{`{"trusted_proxies":["example.com"]}`, "trusted_proxies: invalid IP address"},
		{`{"secret":{"header":"X-Edge-Secret","value":"{env.CLIENTIP_TEST_EMPTY}"}}`, `secret X-Edge-Secret: placeholder {env.CLIENTIP_TEST_EMPTY} is empty or unset: set the environment variable CLIENTIP_TEST_EMPTY`},
		{`{"secret":{"header":"X-Edge-Secret","value":"{env.CLIENTIP_TEST_SURELY_UNSET}"}}`, "placeholder {env.CLIENTIP_TEST_SURELY_UNSET} is empty or unset: set the environment variable CLIENTIP_TEST_SURELY_UNSET"},
		// Part of the value unset: the rest alone ("abc") would be a secret
		// anyone can guess.
		{`{"secret":{"header":"X-Edge-Secret","value":"{env.CLIENTIP_TEST_SURELY_UNSET}abc"}}`, "secret X-Edge-Secret: placeholder {env.CLIENTIP_TEST_SURELY_UNSET} is empty or unset"},
		{`{"secret":{"header":"X-Edge-Secret","value":"abc{env.CLIENTIP_TEST_EMPTY}def"}}`, "placeholder {env.CLIENTIP_TEST_EMPTY} is empty or unset"},
		{`{"secret":{"header":"X-Edge-Secret","value":"{env.CLIENTIP_TEST_SET}{nosuch.placeholder}"}}`, "placeholder {nosuch.placeholder} is empty or unset: write the value literally"},
		{`{"secret":{"header":"X-Edge-Secret","value":""}}`, "secret X-Edge-Secret: value is empty: give the secret the edge sends"},
		{`{"secret":{"header":"X Edge","value":"v"}}`, `secret "X Edge": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"Bad:Name"}`, `header "Bad:Name": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"x-forwarded-for"}`, "is a list, not a single value"},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"X-Real-IP","forwarded":true}`, "header and forwarded are exclusive"},
		{`{"trusted_proxies":["10.0.0.0/8"],"strip":["ok","not ok"]}`, `strip "not ok": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"untrusted":"deny"}`, `untrusted "deny": must be allow, observe or reject`},
		{`{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","reject_status":302}`, "untrusted reject 302: status must be 4xx or 5xx"},
		{`{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","reject_status":600}`, "status must be 4xx or 5xx"},
		{`{"trusted_proxies":["10.0.0.0/8"],"reject_status":403}`, "reject_status 403 is set but untrusted is allow"},
	} {
		_, err := tryProvision(tc.config)
		if err == nil {
			t.Errorf("%s: accepted, want an error containing %q", tc.config, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "client_ip: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got  %v\n want client_ip: ...%s...", tc.config, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`)
	if *h.Hops != 1 || h.Untrusted != UntrustedAllow || h.resolver.source != sourceXFF {
		t.Errorf("defaults: hops %d untrusted %s source %s, want 1 allow xff", *h.Hops, h.Untrusted, h.resolver.source)
	}
	want := "X-Forwarded-For,X-Forwarded-Host,X-Forwarded-Proto,Forwarded,X-Real-Ip,True-Client-Ip,Cf-Connecting-Ip,Fastly-Client-Ip,X-Client-Ip,X-Cluster-Client-Ip,Client-Ip,Cloudfront-Viewer-Address,X-Envoy-External-Address,X-Originating-Ip,X-Remote-Ip,X-Remote-Addr,X-Proxyuser-Ip,X-Forwarded,Forwarded-For,X-Original-Forwarded-For"
	if strings.Join(h.strip, ",") != want {
		t.Errorf("strip %v, want %v", h.strip, want)
	}
	want = "X-Real-Ip,True-Client-Ip,Cf-Connecting-Ip,Fastly-Client-Ip,X-Client-Ip,X-Cluster-Client-Ip,Client-Ip,Forwarded,Cloudfront-Viewer-Address,X-Envoy-External-Address,X-Originating-Ip,X-Remote-Ip,X-Remote-Addr,X-Proxyuser-Ip,X-Forwarded,Forwarded-For,X-Original-Forwarded-For"
	if strings.Join(h.stripTrusted, ",") != want {
		t.Errorf("strip through the edge %v, want %v", h.stripTrusted, want)
	}

	h = provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject"}`)
	if h.RejectStatus != 403 {
		t.Errorf("reject status %d, want 403", h.RejectStatus)
	}

	// Not through the edge, the configured header and the chain are always
	// stripped, and a given list replaces the default one. Through the
	// edge, the configured headers are on the list too (ServeHTTP keeps
	// the one it read, rewritten), and Forwarded is always stripped.
	h = provision(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"x-client","strip":["X-Other","x-client"]}`)
	if got := strings.Join(h.strip, ","); got != "X-Client,X-Forwarded-For,X-Forwarded-Host,X-Forwarded-Proto,Forwarded,X-Other" {
		t.Errorf("strip %v", h.strip)
	}
	if got := strings.Join(h.stripTrusted, ","); got != "X-Other,X-Client,Forwarded" {
		t.Errorf("strip through the edge %v, want [X-Other X-Client Forwarded]", h.stripTrusted)
	}
	h = provision(t, `{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`)
	if slices.Contains(h.stripTrusted, "Forwarded") {
		t.Errorf("forwarded mode strips Forwarded through the edge: %v", h.stripTrusted)
	}
}

func TestAcceptsNearlyEverything(t *testing.T) {
	// Big but not total ranges are the operator's call.
	for _, config := range []string{
		`{"trusted_proxies":["0.0.0.0/1","::/1"]}`,
		`{"trusted_proxies":["0.0.0.0/1","128.0.0.0/2","192.0.0.0/3"]}`,
		`{"trusted_proxies":["255.255.255.255","::"],"hops":16}`,
	} {
		if _, err := tryProvision(config); err != nil {
			t.Errorf("%s: %v", config, err)
		}
	}
}
