package clientip

import (
	"net/http"
	"strings"
	"testing"
)

// Whatever a caller writes left of the client entry is its own business: no
// amount of it, in any shape, may change who the client is or whether the
// request came through the edge (issue 14, item 3). Each case sends the
// caller's padding in front of what the edge wrote, and expects the result
// of the edge's part alone.

// callerPaddings are prefixes a caller can send in its own header; the edge
// then appends its entry.
var callerPaddings = []struct {
	name  string
	lines []string // the caller's header lines
}{
	{"64 empty members", []string{strings.Repeat(",", 64)}},
	{"1000 empty members", []string{strings.Repeat(" ,", 1000)}},
	{"8 KiB of junk", []string{strings.Repeat("x", 8<<10)}},
	{"16 KiB of addresses", []string{strings.Repeat("192.0.2.1, ", 16<<10/11)}},
	{"8 KiB of spaces", []string{strings.Repeat(" ", 8<<10)}},
	{"an unterminated quote", []string{`for="oops;`}},
	{"100 lines", strings.Split(strings.Repeat("192.0.2.1\n", 100), "\n")},
	{"100 empty lines", make([]string, 100)},
}

func TestCallerPaddingXFF(t *testing.T) {
	for _, cfg := range []struct {
		config string
		edge   []string // what the edge (and its hops) wrote, as lines
		want   string
		source source
		reason reason
	}{
		{`{"trusted_proxies":["10.0.0.0/8"]}`, []string{callerIP}, callerIP, sourceXFF, 0},
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":3}`, []string{callerIP + ", 10.1.1.1", "10.2.2.2"}, callerIP, sourceXFF, 0},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"X-Client","hops":2}`, []string{"10.1.1.1"}, callerIP, sourceHeader, 0},
		// An invalid client entry stays invalid whatever lies left of it.
		{`{"trusted_proxies":["10.0.0.0/8"]}`, []string{"unknown"}, "10.0.0.1", sourcePeer, reasonInvalid},
		// So does an untrusted hop in the span, even when the edge's part is
		// shorter than the span: nothing left of that hop is read.
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":4}`, []string{"192.0.2.9"}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
	} {
		h := provision(t, cfg.config)
		for _, pad := range callerPaddings {
			for _, join := range []string{"same line", "own lines"} {
				t.Run(cfg.config+"/"+pad.name+"/"+join, func(t *testing.T) {
					lines := joinLines(pad.lines, cfg.edge, join == "same line", ", ")
					header := hdr("X-Client", callerIP)
					header["X-Forwarded-For"] = lines
					res := h.resolver.resolve(edgePeer, header)
					if res.client.String() != cfg.want || res.source != cfg.source || res.reason != cfg.reason {
						t.Errorf("client %s source %s reason %q, want %s %s %q", res.client, res.source, res.reason, cfg.want, cfg.source, cfg.reason)
					}
				})
			}
		}
	}
}

func TestCallerPaddingForwarded(t *testing.T) {
	for _, cfg := range []struct {
		config string
		edge   []string
		want   string
		source source
		reason reason
	}{
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`, []string{"for=" + callerIP + ";proto=https"}, callerIP, sourceForwarded, 0},
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":2}`, []string{`for=` + callerIP + `, for="10.1.1.1:80"`}, callerIP, sourceForwarded, 0},
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`, []string{"for=unknown"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":4}`, []string{"for=192.0.2.9"}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
	} {
		h := provision(t, cfg.config)
		for _, pad := range callerPaddings {
			for _, join := range []string{"same line", "own lines"} {
				t.Run(cfg.config+"/"+pad.name+"/"+join, func(t *testing.T) {
					lines := joinLines(pad.lines, cfg.edge, join == "same line", ", ")
					res := h.resolver.resolve(edgePeer, http.Header{"Forwarded": lines})
					if res.client.String() != cfg.want || res.source != cfg.source || res.reason != cfg.reason {
						t.Errorf("client %s source %s reason %q, want %s %s %q", res.client, res.source, res.reason, cfg.want, cfg.source, cfg.reason)
					}
				})
			}
		}
	}
}

// The caps still hold for what is parsed: the edge's part itself may not be
// longer than maxChainFields members or maxChainBytes bytes.
func TestChainCapsApplyToTheParsedPart(t *testing.T) {
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"]}`, []resolveCase{
		{"64 members from the right", edgePeer, []string{"X-Forwarded-For", "192.0.2.1, " + callerIP + strings.Repeat(",", 63)}, callerIP, sourceXFF, 0},
		{"65 members from the right", edgePeer, []string{"X-Forwarded-For", "192.0.2.1, " + callerIP + strings.Repeat(",", 64)}, "10.0.0.1", sourcePeer, reasonTooLong},
		{"8 KiB from the right", edgePeer, []string{"X-Forwarded-For", "x, " + callerIP + strings.Repeat(" ", 8<<10-len(callerIP))}, callerIP, sourceXFF, 0},
		{"over 8 KiB from the right", edgePeer, []string{"X-Forwarded-For", "x, " + callerIP + strings.Repeat(" ", 8<<10-len(callerIP)+1)}, "10.0.0.1", sourcePeer, reasonTooLong},
	})
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`)
	for lines, want := range map[int]reason{63: reasonNone, 64: reasonTooLong} {
		header := http.Header{"X-Forwarded-For": append([]string{"192.0.2.1, " + callerIP}, make([]string, lines)...)}
		if res := h.resolver.resolve(edgePeer, header); res.reason != want {
			t.Errorf("client then %d empty lines: reason %q, want %q", lines, res.reason, want)
		}
	}
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`, []resolveCase{
		{"64 elements from the right", edgePeer, []string{"Forwarded", "for=192.0.2.1, for=" + callerIP + strings.Repeat(",", 63)}, callerIP, sourceForwarded, 0},
		{"65 elements from the right", edgePeer, []string{"Forwarded", "for=192.0.2.1, for=" + callerIP + strings.Repeat(",", 64)}, "10.0.0.1", sourcePeer, reasonTooLong},
		{"an 8 KiB element", edgePeer, []string{"Forwarded", "x, for=" + callerIP + ";ext=" + strings.Repeat("x", 8<<10-len("for=;ext=")-len(callerIP))}, callerIP, sourceForwarded, 0},
		{"an element over 8 KiB", edgePeer, []string{"Forwarded", "x, for=" + callerIP + ";ext=" + strings.Repeat("x", 8<<10-len("for=;ext=")-len(callerIP)+1)}, "10.0.0.1", sourcePeer, reasonTooLong},
	})
}

// joinLines puts the caller's lines in front of the edge's: on the same
// line (the edge appended ", entry" to the caller's last line) or as lines
// of their own (the edge added a line).
func joinLines(caller, edge []string, sameLine bool, sep string) []string {
	lines := append([]string(nil), caller...)
	if sameLine && len(lines) > 0 {
		lines[len(lines)-1] += sep + edge[0]
		return append(lines, edge[1:]...)
	}
	return append(lines, edge...)
}
