package clientip

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

var errUntrusted = errors.New("client_ip: request did not come through the edge")

// ServeHTTP resolves the client, publishes it, and applies the untrusted
// policy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	res := h.resolver.resolve(r.RemoteAddr, r.Header)
	if h.resolver.secretHeader != "" {
		delete(r.Header, h.resolver.secretHeader) // never upstream
	}

	viaEdge := res.viaEdge()
	peer := addrString(res.peer, res.peerText)
	client := peer
	if viaEdge {
		client = addrString(res.client, res.clientText)
		cleanXFF(r.Header, &res, client)
	} else {
		for _, name := range h.strip {
			delete(r.Header, name)
		}
	}

	if res.peer.IsValid() {
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, client)
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, viaEdge)

	viaEdgeText := "false"
	if viaEdge {
		viaEdgeText = "true"
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.client_ip.peer", peer)
		repl.Set("http.client_ip.source", res.source.String())
		repl.Set("http.client_ip.via_edge", viaEdgeText)
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(zap.Dict("client_ip",
			zap.String("peer", peer),
			zap.String("source", res.source.String()),
			zap.Bool("via_edge", viaEdge),
		))
	}

	h.counters.requests[res.source].Inc()
	if !viaEdge {
		h.counters.untrusted[res.reason].Inc()
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
	return next.ServeHTTP(w, r)
}
