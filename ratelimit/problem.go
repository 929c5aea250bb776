package ratelimit

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// problemType and problemTitle are the quota-exceeded problem type that
// draft-ietf-httpapi-ratelimit-headers-10 registers in IANA's HTTP Problem
// Types registry, for RFC 9457 problem details.
const (
	problemType  = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemTitle = "Request cannot be satisfied as assigned quota has been exceeded"
	problemMedia = "application/problem+json"
)

// writeProblem answers a rejection with RFC 9457 problem details, and says
// whether it did: only when the client's Accept names
// application/problem+json and the server has no handle_errors routes to
// take the error over (those get the error, as without problem details).
func (h *Handler) writeProblem(w http.ResponseWriter, r *http.Request) bool {
	if !acceptsProblem(r.Header.Values("Accept")) {
		return false
	}
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Errors != nil && len(srv.Errors.Routes) > 0 {
		return false
	}
	body := `{"type":"` + problemType + `","title":"` + problemTitle + `","status":` + strconv.Itoa(h.Status) + "}\n"
	hdr := w.Header()
	hdr.Set("Content-Type", problemMedia)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(h.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
	return true
}

// acceptsProblem is whether Accept field values name
// application/problem+json with a weight above 0. Only that media type
// counts: a client asking for application/json or */* may expect the API's
// own error format, which handle_errors or the application gives.
func acceptsProblem(values []string) bool {
	for _, v := range values {
		for len(v) > 0 {
			var member string
			member, v, _ = strings.Cut(v, ",")
			media, params, _ := strings.Cut(member, ";")
			if !strings.EqualFold(strings.TrimSpace(media), problemMedia) {
				continue
			}
			if weight(params) > 0 {
				return true
			}
		}
	}
	return false
}

// weight is the q parameter among a media range's parameters (RFC 9110
// 12.4.2): 1 when absent; 0 when q is 0 or not a valid weight, so a
// malformed one never opts a client in.
func weight(params string) float64 {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		val = strings.TrimSpace(val)
		// qvalue: "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3("0") ]
		if len(val) == 0 || len(val) > 5 || (val[0] != '0' && val[0] != '1') || strings.Trim(val, "0123456789.") != "" {
			return 0
		}
		q, err := strconv.ParseFloat(val, 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}
