package testredis

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// Cluster is a Redis Cluster of masters only, each a redis-server on the
// test's own loopback address, with the 16384 slots split evenly between
// them. It is built with CLUSTER ADDSLOTSRANGE and CLUSTER MEET, so it
// needs no redis-cli.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n masters (Redis 7.0 or later: it sets each node's
// cluster bus port) and returns once every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	bin := Binary(t)
	host := loopback.Claim(t)
	dir := t.TempDir()
	c := &Cluster{}
	free := loopback.FreePorts(t, host, 2*n) // each node's port and bus port
	for i := range n {
		port, bus := free[2*i], free[2*i+1]
		nodeArgs := append([]string{
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			// Connections from a claimed address come from 127.0.0.1, which
			// the others would take for this node's address.
			"--cluster-announce-ip", host,
			"--cluster-config-file", "nodes-" + strconv.Itoa(i) + ".conf",
			"--dir", dir,
		}, args...)
		c.Nodes = append(c.Nodes, startOn(t, bin, net.JoinHostPort(host, strconv.Itoa(port)), false, nodeArgs))
	}
	for i, s := range c.Nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if r := Command(t, s.Addr(), "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); r != "OK" {
			t.Fatalf("testredis: CLUSTER ADDSLOTSRANGE %d %d on %s: %q", lo, hi, s.Addr(), r)
		}
		if i > 0 {
			h, p, _ := net.SplitHostPort(s.Addr())
			if r := Command(t, c.Nodes[0].Addr(), "CLUSTER", "MEET", h, p, busPort(s)); r != "OK" {
				t.Fatalf("testredis: CLUSTER MEET %s: %q", s.Addr(), r)
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := 0
		for _, s := range c.Nodes {
			if strings.Contains(Command(t, s.Addr(), "CLUSTER", "INFO"), "cluster_state:ok") &&
				strings.Count(Command(t, s.Addr(), "CLUSTER", "NODES"), "connected") == n {
				ok++
			}
		}
		if ok == n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("testredis: cluster of %d not ok after 20s:\n%s\n%s", n, Command(t, c.Nodes[0].Addr(), "CLUSTER", "NODES"), Command(t, c.Nodes[1].Addr(), "CLUSTER", "INFO"))
		}
	}
}

// busPort is the --cluster-port s was started with.
func busPort(s *Server) string {
	for i, a := range s.args {
		if a == "--cluster-port" {
			return s.args[i+1]
		}
	}
	return ""
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Nodes {
		a = append(a, s.Addr())
	}
	return a
}

// Command sends one command to the plain-TCP Redis at addr and returns its
// reply: a simple string, error ("ERR ...", with its prefix), integer or bulk
// string as text; an array as its elements joined by newlines.
func Command(t testing.TB, addr string, args ...string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("testredis: %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatalf("testredis: %s: %v", addr, err)
	}
	v, err := readReply(bufio.NewReader(conn))
	if err != nil {
		t.Fatalf("testredis: %s: reading the reply to %q: %v", addr, args, err)
	}
	return v
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', '-', ':':
		return line[1:], nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		var parts []string
		for range n {
			v, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, v)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
