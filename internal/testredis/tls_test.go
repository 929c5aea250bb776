package testredis

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartTLS(t *testing.T) {
	ca := NewCA(t, "t")
	s := StartTLS(t, ca, true)
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(ca.File)
	pool.AppendCertsFromPEM(b)
	cert, key := ca.Issue("client", "")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("PING\r\n"))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "+PONG") {
		t.Fatalf("PING over mutual TLS: %q", buf[:n])
	}
}
