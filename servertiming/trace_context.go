package servertiming

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"reflect"
)

// tracedRequest is the request the handlers inside get: a copy of the
// request whose context carries the timing's client trace, in one
// allocation (httptrace.WithClientTrace's context value and
// Request.WithContext's copy are two), with room for the response's
// header values (see fieldSlot), which would be another. Never pooled:
// handlers, and the transport of an upstream round trip, hold the request
// and its context, and the header map holds the values.
type tracedRequest struct {
	r    http.Request
	ctx  traceContext
	slot fieldSlot // last: the GC scans an object up to its last pointer
}

// traceContext is context.WithValue(parent, httptrace's key, trace), as
// httptrace.WithClientTrace makes it for a trace without net hooks and
// with no trace in parent; everything else is parent's.
type traceContext struct {
	context.Context
	trace *httptrace.ClientTrace
}

// Value returns the trace for httptrace's key, as ContextClientTrace asks.
func (c *traceContext) Value(key any) any {
	if key == clientTraceKey {
		return c.trace
	}
	return c.Context.Value(key)
}

// clientTraceKey is the key httptrace.ContextClientTrace looks its trace
// up with (unexported, so learned by asking once), or nil if that does not
// work as expected: then withTrace uses httptrace.WithClientTrace.
var clientTraceKey any

func init() { learnClientTraceKey() }

// keyProbe records the key it is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

func learnClientTraceKey() {
	p := &keyProbe{Context: context.Background()}
	_ = httptrace.ContextClientTrace(p)
	if p.key == nil || !reflect.TypeOf(p.key).Comparable() {
		return
	}
	clientTraceKey = p.key
	// The key must find the trace back, and nothing else.
	trace := new(httptrace.ClientTrace)
	c := &traceContext{Context: context.Background(), trace: trace}
	if httptrace.ContextClientTrace(c) != trace || c.Value(struct{}{}) != nil {
		clientTraceKey = nil
	}
}

// withTrace returns a copy of r whose context carries trace, the
// timing's pooled hooks. A trace already in r's context (a module outside
// this one traces the request's round trips too) is composed as
// httptrace.WithClientTrace composes it, into a copy of trace: composing
// modifies the trace it is given, and the pooled one would call the outer
// hooks once more each time it is reused.
//
// The slot is where the response's header values can be made, nil when
// the copy has none (a trace composed by httptrace).
func withTrace(r *http.Request, trace *httptrace.ClientTrace) (*http.Request, *fieldSlot) {
	ctx := r.Context()
	// A trace with net hooks needs the context value net's dialer reads
	// too, which only WithClientTrace adds.
	netHooks := trace.DNSStart != nil || trace.DNSDone != nil || trace.ConnectStart != nil || trace.ConnectDone != nil
	if httptrace.ContextClientTrace(ctx) != nil || clientTraceKey == nil || netHooks {
		own := new(httptrace.ClientTrace)
		*own = *trace
		return r.WithContext(httptrace.WithClientTrace(ctx, own)), nil
	}
	tr := new(tracedRequest)
	tr.ctx = traceContext{Context: ctx, trace: trace}
	// WithContext is inlined and its copy does not escape: the request
	// is copied into tr, not allocated a second time.
	tr.r = *r.WithContext(&tr.ctx)
	return &tr.r, &tr.slot
}
