package clientip

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

var errUntrusted = errors.New("client_ip: request did not come through the edge")

// ServeHTTP resolves the client, publishes it, and applies the untrusted
// policy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	res := h.resolver.resolveRequest(r)
	if h.resolver.secretHeader != "" {
		delete(r.Header, h.resolver.secretHeader) // never upstream
	}
	if v := h.resolver.verify; v != nil {
		delete(r.Header, v.header) // used up, valid or not
	}

	viaEdge := res.viaEdge()
	peer := addrString(res.peer, res.peerText)
	client := peer
	// Whatever the path, the only client-address headers that go further
	// are the ones written here from the resolved client (see rewriteChain).
	if viaEdge {
		client = addrString(res.client, res.clientText)
		// Of the configured headers, only the one read goes on, rewritten.
		var read []string
		if res.source == sourceHeader {
			read = r.Header[res.header]
		}
		for _, name := range h.stripTrusted {
			delete(r.Header, name)
		}
		if read != nil {
			r.Header[res.header] = read
		}
		rewriteChain(r.Header, &res, client)
	} else {
		for _, name := range h.strip {
			delete(r.Header, name)
		}
	}

	// tracing ran first, and its span's client.address is the leftmost
	// X-Forwarded-For entry as the caller wrote it: give it the client.
	if span := trace.SpanFromContext(r.Context()); client != "" && span.IsRecording() {
		span.SetAttributes(attribute.String("client.address", client))
	}

	peerValue := any(peer) // box once: each conversion to any allocates
	clientValue := peerValue
	if viaEdge {
		clientValue = client
	}
	// Always set: for a peer that is no address (a Unix socket), what
	// Caddy's own trusted_proxies_unix read from the caller's headers
	// must not stand.
	caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, clientValue)
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, viaEdge)
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.client_ip.peer", peerValue)
		repl.Set("http.client_ip.source", sourceValues[res.source])
		repl.Set("http.client_ip.via_edge", viaEdgeValues[b2i(viaEdge)])
		repl.Set("http.client_ip.reason", whyValue(&res))
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(zap.Object("client_ip", logFields{peer: peer, source: res.source, viaEdge: viaEdge, reason: res.reason}))
	}

	h.counters.requests[res.source].Inc()
	if res.untrusted() {
		h.counters.untrusted[res.reason].Inc()
		switch res.reason {
		case reasonSourceCoversAll:
			h.logSourceCoversAll(res.coveredFamily)
		case reasonAssertionReplayCacheFull:
			h.logReplayCacheFull()
		}
		switch h.Untrusted {
		case UntrustedObserve:
			if c := h.logger.Check(zap.InfoLevel, "request did not come through the edge"); c != nil {
				c.Write(zap.String("peer", peer), zap.String("reason", res.reason.String()),
					zap.String("method", r.Method), zap.String("uri", r.RequestURI))
			}
		case UntrustedReject:
			return caddyhttp.Error(h.RejectStatus, fmt.Errorf("%w (%s)", errUntrusted, res.reason))
		}
	}
	if s := h.signer; s != nil {
		// Whatever the caller sent under this name is replaced: only this
		// PoP's own assertion goes further in.
		if res.client.IsValid() {
			r.Header[s.header] = []string{s.sign(client, r)}
		} else {
			delete(r.Header, s.header)
		}
	}
	return next.ServeHTTP(w, r)
}

// Placeholder values boxed once.
var (
	sourceValues = func() (v [numSources]any) {
		for s := range numSources {
			v[s] = s.String()
		}
		return
	}()
	viaEdgeValues = [2]any{"false", "true"}
	reasonValues  = func() (v [numReasons]any) {
		for r := range numReasons {
			v[r] = r.String()
		}
		return
	}()
)

// whyValue is {http.client_ip.reason}: the source through the edge (or
// `peer` with nothing in front), else why the request was not believed.
func whyValue(res *resolution) any {
	if res.untrusted() {
		return reasonValues[res.reason]
	}
	return sourceValues[res.source]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logFields is the access log's "client_ip" object.
type logFields struct {
	peer    string
	source  source
	viaEdge bool
	reason  reason
}

func (f logFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("peer", f.peer)
	enc.AddString("source", f.source.String())
	enc.AddBool("via_edge", f.viaEdge)
	if f.reason != reasonNone {
		enc.AddString("reason", f.reason.String())
	}
	return nil
}

// logSourceCoversAll reports a dynamic source whose answer covers every
// address, at most once per logInterval: it lasts until the source
// refreshes, and the metric counts every request meanwhile.
func (h *Handler) logSourceCoversAll(family string) {
	due, refused := h.resolver.guard.shouldLog(time.Now())
	if !due {
		return
	}
	h.logger.Error("trusted_proxies_source returned ranges covering every address; not believed: requests are judged not to have come through the edge until it returns the edge's own ranges",
		zap.String("source", h.sourceName), zap.String("covers", family), zap.Uint64("requests_since_last_report", refused))
}

// logReplayCacheFull reports a full record of used assertions, at most once
// per logInterval: it lasts until remembered assertions expire.
func (h *Handler) logReplayCacheFull() {
	v := h.resolver.verify
	due, refused := v.used.full.shouldLog(time.Now())
	if !due {
		return
	}
	h.logger.Error("verify: the record of used assertions is full; assertions are refused until remembered ones expire: raise replay_cache_size (at least the signed requests per second times 1.2 x max_age + 5s)",
		zap.Int("replay_cache_size", h.Verify.ReplayCacheSize), zap.Duration("max_age", v.maxAge), zap.Uint64("requests_since_last_report", refused))
}
