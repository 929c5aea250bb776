package servertiming

import (
	"crypto/tls"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"time"
)

// upstream records the events of the request's upstream round trips, as
// net/http's transport reports them (reverse_proxy's transport uses the
// request context's trace). The transport calls the hooks from its own
// goroutines, hence the atomics. Times are nanoseconds since the request
// reached the handler, plus one, so that 0 means "not yet".
type upstream struct {
	// used says a hook fired: its closures may still be called, so the
	// timing is not reused.
	used atomic.Bool

	getConn, gotConn, tlsStart, tlsDone, wrote, firstByte atomic.Int64
	// hints says the round trip got a 1xx (103 Early Hints): its first
	// byte was the 1xx's, and the origin's time runs on to the final
	// response, which no hook reports (see read).
	hints atomic.Bool
	// reused is 0 until GotConn, then connNew or connReused.
	reused atomic.Int32
	// wait sums the upstream round trips, each from GetConn to
	// GotFirstResponseByte, or to the next GetConn for an attempt that got
	// no response (reverse_proxy's retries).
	wait atomic.Int64
}

const (
	connNew    = 1
	connReused = 2
)

// hooks returns the trace hooks of t; made once per pooled timing.
func (t *timing) hooks() httptrace.ClientTrace {
	u := &t.up
	return httptrace.ClientTrace{
		GetConn: func(string) {
			u.used.Store(true)
			at := t.since()
			if prev := u.getConn.Load(); prev != 0 && u.firstByte.Load() == 0 {
				u.wait.Add(at - prev) // an attempt that got no response
			}
			u.gotConn.Store(0)
			u.tlsStart.Store(0)
			u.tlsDone.Store(0)
			u.wrote.Store(0)
			u.firstByte.Store(0)
			u.reused.Store(0)
			u.hints.Store(false)
			u.getConn.Store(at)
		},
		GotConn: func(info httptrace.GotConnInfo) {
			u.used.Store(true)
			u.gotConn.Store(t.since())
			if info.Reused {
				u.reused.Store(connReused)
			} else {
				u.reused.Store(connNew)
			}
		},
		TLSHandshakeStart: func() { u.used.Store(true); u.tlsStart.Store(t.since()) },
		TLSHandshakeDone:  func(tls.ConnectionState, error) { u.used.Store(true); u.tlsDone.Store(t.since()) },
		WroteRequest:      func(httptrace.WroteRequestInfo) { u.used.Store(true); u.wrote.Store(t.since()) },
		Got1xxResponse: func(int, textproto.MIMEHeader) error {
			u.used.Store(true)
			u.hints.Store(true)
			return nil
		},
		GotFirstResponseByte: func() {
			u.used.Store(true)
			at := t.since()
			if gc := u.getConn.Load(); gc != 0 && u.firstByte.Load() == 0 {
				u.wait.Add(at - gc)
			}
			u.firstByte.Store(at)
		},
	}
}

// since is the time since the request began, plus one (0 is "not yet").
func (t *timing) since() int64 { return int64(time.Since(t.start)) + 1 }

// upstreamTimes is what the entries say of the upstream, read at one moment.
type upstreamTimes struct {
	// wait is the time the PoP waited on upstreams, to subtract from edge.
	wait time.Duration
	// ok says the last round trip got a response: origin and conn are set.
	ok     bool
	origin time.Duration
	reused bool
	// dial and tls are set for a new connection (tls only over TLS).
	dial, tls       time.Duration
	hasDial, hasTLS bool
}

// read returns the upstream's times as of at (nanoseconds since the
// request reached the handler, plus one). An attempt still without a
// response counts as waiting on the upstream until at. With final set, at
// is when the final response's header reaches the handler's writer: after
// a 1xx, whose first byte GotFirstResponseByte reported, the origin's time
// (and the upstream wait) runs to at, reverse_proxy's own header handling
// (microseconds) included.
func (u *upstream) read(at int64, final bool) (ut upstreamTimes) {
	if !u.used.Load() {
		return ut
	}
	wait := u.wait.Load()
	gc, fb := u.getConn.Load(), u.firstByte.Load()
	if gc != 0 && fb == 0 && at > gc {
		wait += at - gc
	}
	if final && fb != 0 && at > fb && u.hints.Load() {
		wait += at - fb
		fb = at
	}
	ut.wait = time.Duration(wait)
	got := u.gotConn.Load()
	if fb == 0 || got == 0 {
		return ut
	}
	ut.ok = true
	// From the request written (WroteRequest) to the first byte of the
	// response; from GotConn when the response came before the request was
	// all written.
	from := u.wrote.Load()
	if from == 0 || from > fb {
		from = got
	}
	ut.origin = time.Duration(fb - from)
	ut.reused = u.reused.Load() == connReused
	if !ut.reused {
		ts, td := u.tlsStart.Load(), u.tlsDone.Load()
		dialEnd := got
		if ts != 0 && td >= ts {
			ut.tls, ut.hasTLS = time.Duration(td-ts), true
			dialEnd = ts
		}
		if dialEnd >= gc {
			ut.dial, ut.hasDial = time.Duration(dialEnd-gc), true
		}
	}
	return ut
}
