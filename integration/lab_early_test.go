package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

// labEarlyLog records what the far origin received other than GETs.
type labEarlyLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *labEarlyLog) add(s string) {
	l.mu.Lock()
	l.seen = append(l.seen, s)
	l.mu.Unlock()
}

func (l *labEarlyLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// labEarlyData: 0-RTT data can be replayed by anyone who captured it, so a
// request in early data must be safe to repeat. A POST sent in the first
// flight of a resumed QUIC connection reaches the origin with Early-Data: 1
// (the PoP's reverse_proxy adds it, RFC 8470), so the origin can tell; a
// route the PoP must not forward early (/orders/) answers 425 Too Early,
// and the client repeats the request once the handshake is complete, when
// it is no longer replayable and reaches the origin without the header.
// popURL is the PoP over the short link.
func labEarlyData(t *testing.T, popURL, phone string, origin *labEarlyLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tickets := tls.NewLRUClientSessionCache(8)
	tlsConf := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{http3.NextProtoH3}, ClientSessionCache: tickets}
	addr, err := net.ResolveUDPAddr("udp", strings.TrimPrefix(popURL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(phone)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: udp}
	defer func() { tr.Close(); udp.Close() }()
	h3 := &http3.Transport{}
	defer h3.Close()

	// send opens a connection (early: DialEarly, the request in its first
	// flight) and POSTs body to path; it returns the status and whether the
	// connection used 0-RTT.
	send := func(path string, early bool) (status int, used0RTT bool) {
		t.Helper()
		var conn *quic.Conn
		if early {
			conn, err = tr.DialEarly(ctx, addr, tlsConf, &quic.Config{})
		} else {
			conn, err = tr.Dial(ctx, addr, tlsConf, &quic.Config{})
		}
		if err != nil {
			t.Fatalf("dial the PoP over QUIC: %v", err)
		}
		defer conn.CloseWithError(0, "")
		cc := h3.NewClientConn(conn)
		// OpenRequestStream does not wait for the handshake, unlike
		// RoundTrip for anything but GET_0RTT and HEAD_0RTT.
		str, err := cc.OpenRequestStream(ctx)
		if err != nil {
			t.Fatalf("open a request stream: %v", err)
		}
		const body = "order=1"
		// The body goes on the stream after the header, by hand.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://localhost"+path, nil)
		req.ContentLength = int64(len(body))
		if err := str.SendRequestHeader(req); err != nil {
			t.Fatalf("send the request header: %v", err)
		}
		if _, err := io.WriteString(str, body); err != nil {
			t.Fatalf("send the body: %v", err)
		}
		str.Close()
		resp, err := str.ReadResponse()
		if err != nil {
			t.Fatalf("read the response: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		select {
		case <-conn.HandshakeComplete():
		case <-ctx.Done():
			t.Fatalf("POST %s: QUIC handshake not complete after the response: %v", path, ctx.Err())
		}
		return resp.StatusCode, conn.ConnectionState().Used0RTT
	}

	// A first, full handshake gets the ticket.
	if status, _ := send("/form", false); status != 200 {
		t.Fatalf("POST /form on a full handshake: %d", status)
	}
	// A returning phone: the POST rides in early data.
	if status, early := send("/form", true); status != 200 || !early {
		t.Fatalf("POST /form in early data: %d, 0-RTT used %v; want 200 in 0-RTT", status, early)
	}
	// The order route answers 425: the request never reached the origin.
	if status, early := send("/orders/new", true); status != http.StatusTooEarly || !early {
		t.Fatalf("POST /orders/new in early data: %d, 0-RTT used %v; want 425 in 0-RTT", status, early)
	}
	// Retried after the handshake (as a client must after 425), it passes.
	if status, _ := send("/orders/new", false); status != 200 {
		t.Fatalf("POST /orders/new after the handshake: %d, want 200", status)
	}
	want := []string{"POST /form Early-Data=", "POST /form Early-Data=1", "POST /orders/new Early-Data="}
	if got := origin.all(); !slices.Equal(got, want) {
		t.Errorf("the origin received %q, want %q", got, want)
	}
	t.Logf("early data at the origin: %q", origin.all())
}

// labWriteHTML writes the lab's rows as an edgebench HTML report.
func labWriteHTML(path string, rows []*labRow) error {
	report := &edgebench.Report{Title: "edge lab: a phone 20 ms from a PoP, the origin 250 ms from both"}
	for _, r := range rows {
		report.AddResult(r.name, r.res)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
