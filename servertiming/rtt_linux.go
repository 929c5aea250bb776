//go:build linux

package servertiming

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// tcpRTT reads the connection's smoothed RTT from TCP_INFO (tcpi_rtt, in
// microseconds).
func tcpRTT(c *net.TCPConn) (time.Duration, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var rtt uint32
	var ok bool
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			rtt, ok = info.Rtt, true
		}
	})
	return time.Duration(rtt) * time.Microsecond, ok
}
