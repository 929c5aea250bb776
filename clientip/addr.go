package clientip

import (
	"net/netip"
	"strings"
)

// maxNodeLen is longer than any address a proxy writes: the longest,
// "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535", has 53 bytes.
const maxNodeLen = 64

// parseNode parses one address as proxies write it: a bare IPv4 or IPv6
// address, IPv4 with a port, or a bracketed IPv6 address with an optional
// port. It returns the address (IPv4-mapped IPv6 unmapped) and the text of
// the address part, so a caller can reuse that text when it is already in
// canonical form. Zones are refused: no remote caller has one.
//
// The shape is checked before netip parses anything, so garbage costs
// neither time nor the allocation of a parse error.
func parseNode(tok string) (netip.Addr, string, bool) {
	if tok == "" || len(tok) > maxNodeLen || !nodeChars(tok) {
		return netip.Addr{}, "", false
	}
	host := tok
	switch {
	case tok[0] == '[':
		end := strings.IndexByte(tok, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host = tok[1:end]
		if rest := tok[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, "", false
		}
		if strings.Count(host, ":") < 2 { // only IPv6 goes in brackets
			return netip.Addr{}, "", false
		}
	case strings.Count(tok, ":") == 1: // IPv4 with a port; IPv6 has 2 or more
		colon := strings.IndexByte(tok, ':')
		if !validPort(tok[colon+1:]) {
			return netip.Addr{}, "", false
		}
		host = tok[:colon]
		if strings.IndexByte(host, '.') < 0 {
			return netip.Addr{}, "", false
		}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	return addr.Unmap(), host, true
}

// nodeChars reports whether s holds only characters an address with a port
// can have. It rules out zones ('%'), `unknown`, obfuscated names and most
// garbage.
func nodeChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNodeChar(s[i]) {
			return false
		}
	}
	return true
}

func isNodeChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '.', c == ':', c == '[', c == ']':
		return true
	}
	return false
}

// validPort reports whether s is a decimal port number 0..65535.
func validPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// parsePeer parses the TCP peer from http.Request.RemoteAddr ("ip:port" or
// "[v6]:port"). Unlike parseNode it drops the zone of a link-local peer, as
// Caddy does, since the connection really came from there.
func parsePeer(remoteAddr string) (netip.Addr, string, bool) {
	host := remoteAddr
	if i := strings.LastIndexByte(remoteAddr, ':'); i >= 0 {
		host = remoteAddr[:i]
		if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
			host = host[1 : len(host)-1]
		}
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	return addr.Unmap(), host, true
}

// addrString returns the canonical text of addr, reusing text (a substring
// of a header or of RemoteAddr) when it already is canonical, so the common
// case costs no allocation.
func addrString(addr netip.Addr, text string) string {
	if !addr.IsValid() { // a Unix-socket peer ("@"), or no address at all ("")
		return text
	}
	var buf [64]byte
	if b := addr.AppendTo(buf[:0]); string(b) == text {
		return text
	}
	return addr.String()
}
