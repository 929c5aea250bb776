package dictionary

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// hashSize is the length of a dictionary's SHA-256, the only hash RFC 9842
// defines.
const hashSize = sha256.Size

var (
	errNoDictionary = errors.New("no Available-Dictionary")
	errMalformed    = errors.New("malformed Available-Dictionary")
)

// parseAvailableDictionary reads the Available-Dictionary request field
// (RFC 9842): one RFC 8941 byte sequence, ":<base64 of 32 bytes>:".
// The value is the client's to write, so it is read strictly: one field
// line, optional surrounding spaces, canonical base64 with padding, exactly
// 32 bytes, no parameters. Anything else is errMalformed, and the response
// is then compressed as if the field were absent.
func parseAvailableDictionary(values []string) ([hashSize]byte, error) {
	var h [hashSize]byte
	switch len(values) {
	case 0:
		return h, errNoDictionary
	case 1:
	default:
		return h, errMalformed // an sf-item cannot span field lines
	}
	v := strings.Trim(values[0], " ")
	// 32 bytes are 44 base64 characters with one '=' of padding.
	const encodedLen = (hashSize + 2) / 3 * 4
	if len(v) != encodedLen+2 || v[0] != ':' || v[len(v)-1] != ':' {
		return h, errMalformed
	}
	// Decode writes up to 33 bytes for 44 characters (when the client
	// leaves out the padding): never decode into h directly.
	var buf [encodedLen / 4 * 3]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(v[1:len(v)-1]))
	if err != nil || n != hashSize {
		return h, errMalformed
	}
	copy(h[:], buf[:n])
	return h, nil
}

// formatAvailableDictionary is the field value naming hash, for tests and
// clients.
func formatAvailableDictionary(hash [hashSize]byte) string {
	return ":" + base64.StdEncoding.EncodeToString(hash[:]) + ":"
}

// useAsDictionary is the Use-As-Dictionary response field (RFC 9842)
// of a marked response: an sf-dictionary with match, and match-dest and id
// when configured. Every string in it was validated at provision time, so
// none needs escaping.
func useAsDictionary(match string, dests []string, id string) string {
	var b strings.Builder
	b.WriteString(`match="`)
	b.WriteString(match)
	b.WriteByte('"')
	if len(dests) > 0 {
		b.WriteString(`, match-dest=(`)
		for i, d := range dests {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteByte('"')
			b.WriteString(d)
			b.WriteByte('"')
		}
		b.WriteByte(')')
	}
	if id != "" {
		b.WriteString(`, id="`)
		b.WriteString(id)
		b.WriteByte('"')
	}
	return b.String()
}

// requestReadable reports whether the browser may read the response to r
// as far as the request tells (RFC 9842, security considerations: dictionaries and
// dictionary-compressed responses must be same-origin or CORS-readable). A
// request without Sec-Fetch-Site comes from a client that is not a browser
// (or an old one) and has no opaque responses. A cross-origin request in
// no-cors mode gets an opaque response: no dictionary and no delta for it.
// A cross-origin CORS request is readable only if the response allows it
// (responseReadable).
func requestReadable(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
		return true
	}
	return r.Header.Get("Sec-Fetch-Mode") == "cors"
}

// responseReadable completes requestReadable once the response header is
// known: a cross-origin CORS request is readable only when the response's
// Access-Control-Allow-Origin is * or the request's Origin.
func responseReadable(r *http.Request, h http.Header) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	if r.Header.Get("Sec-Fetch-Mode") != "cors" {
		return false
	}
	acao := strings.TrimSpace(h.Get("Access-Control-Allow-Origin"))
	// A request carrying credentials (cookies, Authorization) was sent in
	// credentials mode "include": the browser reads its response only if
	// the response names the origin (not *) and allows credentials
	// (Fetch, CORS check).
	credentialed := len(r.Header["Cookie"]) > 0 || len(r.Header["Authorization"]) > 0
	if credentialed && !strings.EqualFold(strings.TrimSpace(h.Get("Access-Control-Allow-Credentials")), "true") {
		return false
	}
	if acao == "*" {
		return !credentialed
	}
	origin := r.Header.Get("Origin")
	return origin != "" && origin != "null" && acao == origin
}

// sharedCacheable reports whether a shared cache could give the response
// to r to any client asking for the same URL (RFC 9111 §3, §4.1): no
// Set-Cookie, not private or no-store, no Authorization on the request,
// and a Vary naming nothing but the fields the delta cache keys on (the
// coding, from Accept-Encoding, and the dictionary). Only such a response
// is looked up in or added to the delta cache, whose key does not hold the
// cookie, credentials or other request fields an upstream may vary on
// under one ETag.
func sharedCacheable(r *http.Request, h http.Header) bool {
	if len(h["Set-Cookie"]) > 0 || len(r.Header["Authorization"]) > 0 ||
		hasToken(h["Cache-Control"], "private") || hasToken(h["Cache-Control"], "no-store") {
		return false
	}
	for _, v := range h["Vary"] {
		for item := range strings.SplitSeq(v, ",") {
			switch item = strings.TrimSpace(item); {
			case item == "", strings.EqualFold(item, "Accept-Encoding"), strings.EqualFold(item, "Available-Dictionary"):
			default:
				return false
			}
		}
	}
	return true
}

// hasToken reports whether a comma-separated header has token (any case).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if name, _, _ := strings.Cut(item, "="); strings.EqualFold(strings.TrimSpace(name), token) {
				return true
			}
		}
	}
	return false
}

// addVary adds each token to the Vary header unless listed already.
func addVary(h http.Header, tokens ...string) {
	for _, t := range tokens {
		if !hasToken(h["Vary"], t) && !hasToken(h["Vary"], "*") {
			h["Vary"] = append(h["Vary"], t)
		}
	}
}
