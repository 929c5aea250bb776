package integration

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// LatencyProxy forwards TCP from a loopback address of its own, on port,
// to target, and delivers what target sends only after delay, as a network
// with that one-way latency would (in order, each chunk delay after it was
// read). It returns the proxy's host; it closes with t.
//
// On loopback a server's reply can reach Chromium in the same read as its
// SETTINGS, before Chromium's HTTP/2 transaction has finished sending the
// request and waits for headers; Chromium drops a 103 that arrives then
// (the netlog shows HTTP2_SESSION_RECV_HEADERS :status 103 with no
// HTTP_TRANSACTION_READ_EARLY_HINTS_RESPONSE_HEADERS). No real network
// delivers a reply that fast.
func LatencyProxy(t testing.TB, port int, target string, delay time.Duration) string {
	t.Helper()
	host := loopback.Claim(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("latency proxy: listen: %v", err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			wg.Add(2)
			go func() { // client to server: as it comes
				defer wg.Done()
				_, _ = io.Copy(server, client)
				server.Close()
			}()
			go func() {
				defer wg.Done()
				delayedCopy(client, server, delay)
				client.Close()
			}()
		}
	}()
	return host
}

// delayedCopy writes to dst each chunk read from src delay after it was read.
func delayedCopy(dst io.Writer, src io.Reader, delay time.Duration) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{time.Now().Add(delay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range chunks {
		if failed {
			continue // drain so the reader ends
		}
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.data); err != nil {
			failed = true
		}
	}
}
