//go:build !linux

package servertiming

import (
	"net"
	"time"
)

// tcpRTT: TCP_INFO is Linux's; elsewhere the rtt entry is left out.
func tcpRTT(*net.TCPConn) (time.Duration, bool) { return 0, false }
