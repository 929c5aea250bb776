package testredis

import (
	"net"
	"sync"
	"testing"
)

// Hung listens on addr ("127.0.0.1:0" for any free port) and accepts
// connections that it never answers, as a Redis stuck in a long command or a
// middlebox that black-holes traffic. It returns the address it listens on
// and closes the listener and every connection when the test ends.
func Hung(t testing.TB, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("testredis: hung server on %s: %v", addr, err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed at cleanup
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
