package testredis

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// CA is a certificate authority made for one test, with PEM files in a
// directory of the test's own.
type CA struct {
	t    testing.TB
	dir  string
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file.
	File string
}

// NewCA makes a CA named name (its files are named after it).
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "edgekit test CA " + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), name: name, cert: cert, key: key}
	ca.File = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate signed by the CA, for the IP address host
// (a server) or for a client (host ""), and returns its certificate and key
// files.
func (ca *CA) Issue(name, host string) (certFile, keyFile string) {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if host != "" {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP(host)}
		tmpl.DNSNames = []string{"redis.test"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(name+".pem", "CERTIFICATE", der), ca.write(name+"-key.pem", "EC PRIVATE KEY", kb)
}

func (ca *CA) write(name, typ string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// StartTLS starts redis-server listening with TLS only (--port 0), with a
// server certificate from ca for its address; with mutual, it requires a
// client certificate from ca.
func StartTLS(t testing.TB, ca *CA, mutual bool, args ...string) *Server {
	t.Helper()
	bin := Binary(t)
	host := loopback.Claim(t)
	cert, key := ca.Issue("redis-server", host)
	auth := "no"
	if mutual {
		auth = "yes"
	}
	args = append([]string{
		"--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca.File, "--tls-auth-clients", auth,
	}, args...)
	return startOn(t, bin, net.JoinHostPort(host, strconv.Itoa(loopback.FreePort(t, host))), true, args)
}
