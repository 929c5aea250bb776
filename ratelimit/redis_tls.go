package ratelimit

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// RedisTLS connects to Redis over TLS, as managed Redis offerings require.
// An empty block verifies the server against the system's roots.
type RedisTLS struct {
	// CA is a PEM file of the certificate authorities that sign the
	// server's certificate; default the system's roots.
	CA string `json:"ca,omitempty"`
	// Cert and Key are PEM files of a client certificate and its key, for
	// servers that require one (mutual TLS, `tls-auth-clients yes`). Both
	// or neither.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// ServerName is the name the server's certificate must hold; default
	// the host of address.
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate: anyone on the path
	// can then read the password and the traffic. Only as written out in
	// full, never with ca or server_name (which it would silently ignore).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// config loads the files into a tls.Config; an unreadable or malformed
// file refuses the config, naming it.
func (r *RedisTLS) config() (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         r.ServerName,
		InsecureSkipVerify: r.InsecureSkipVerify, //nolint:gosec // only as the operator writes it out
	}
	if r.CA != "" {
		b, err := os.ReadFile(r.CA)
		if err != nil {
			return nil, fmt.Errorf("tls: ca: %v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls: ca %s: no PEM certificate in it", r.CA)
		}
	}
	if r.Cert != "" {
		pair, err := tls.LoadX509KeyPair(r.Cert, r.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: cert %s, key %s: %v", r.Cert, r.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// identity is what tells two TLS settings apart for the shared client.
func (r *RedisTLS) identity() string {
	if r == nil {
		return "plain"
	}
	return fmt.Sprintf("tls ca=%q cert=%q key=%q server_name=%q insecure=%v", r.CA, r.Cert, r.Key, r.ServerName, r.InsecureSkipVerify)
}

// unmarshal reads
//
//	tls {
//	    ca <file>
//	    cert <file>
//	    key <file>
//	    server_name <name>
//	    insecure_skip_verify
//	}
func (r *RedisTLS) unmarshal(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "insecure_skip_verify" {
			if d.NextArg() {
				return d.ArgErr()
			}
			r.InsecureSkipVerify = true
			continue
		}
		var val string
		if !d.Args(&val) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "ca":
			r.CA = val
		case "cert":
			r.Cert = val
		case "key":
			r.Key = val
		case "server_name":
			r.ServerName = val
		default:
			return d.Errf("throttle: store redis: tls: unknown option %q (ca, cert, key, server_name, insecure_skip_verify)", opt)
		}
	}
	if err := checkTLS(r); err != nil {
		return d.Err(err.Error())
	}
	return nil
}
