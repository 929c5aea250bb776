package clientip

import "testing"

// TestSecretNotJudgedForStrangers: a peer outside the trusted ranges is
// refused as untrusted_hop whatever X-Edge-Secret it sends, so that the
// reason (which logs, metrics and a response header can show) never tells a
// stranger whether its guess of the secret was right.
func TestSecretNotJudgedForStrangers(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"CF-Connecting-IP","secret":{"header":"X-Edge-Secret","value":"s3cr3tvalue"}}`)
	for _, guess := range []string{"guess1", "s3cr3tvalue", ""} {
		r := newRequest("GET", "http://example.com/", "192.0.2.9:4711", "CF-Connecting-IP", callerIP)
		if guess != "" {
			r.Header.Set("X-Edge-Secret", guess)
		}
		if res := h.resolver.resolveRequest(r); res.reason != reasonUntrustedHop {
			t.Errorf("stranger with secret %q: reason %q, want %q", guess, res.reason, reasonUntrustedHop)
		}
	}
	// From the edge, the secret still decides.
	r := newRequest("GET", "http://example.com/", edgePeer, "CF-Connecting-IP", callerIP, "X-Edge-Secret", "guess1")
	if res := h.resolver.resolveRequest(r); res.reason != reasonSecret {
		t.Errorf("edge with a wrong secret: reason %q, want %q", res.reason, reasonSecret)
	}
}
