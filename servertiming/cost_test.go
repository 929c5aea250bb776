package servertiming

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// costRequest is BenchmarkHandler's request: HTTP/2 over TLS, with the
// variables Caddy's server sets.
func costRequest(ctx context.Context) (*http.Request, map[string]any) {
	r := httptest.NewRequest("GET", "https://pop.example/x", nil)
	r.ProtoMajor = 2
	r.TLS = &tls.ConnectionState{HandshakeComplete: true}
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.1", caddyhttp.TrustedProxyVarKey: false, caddyStartTime: time.Now()}
	return r.WithContext(context.WithValue(ctx, caddyhttp.VarsCtxKey, vars)), vars
}

// TestHandlerAllocs pins what a timed request without an upstream
// allocates: one allocation, the request the handlers inside get, with
// the trace in its context and the header's entries (the string and its
// slice in the map) beside it, with or without Timing-Allow-Origin, whose
// value shares the entries' room. next allocates nothing.
func TestHandlerAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		tao  []string
	}{{"no timing_allow_origin", nil}, {"timing_allow_origin", []string{"https://app.example"}}} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHandler()
			h.TimingAllowOrigin = tc.tao
			if len(tc.tao) > 0 {
				h.tao = tc.tao[0]
			}
			r, vars := costRequest(context.Background())
			w := &discard{h: http.Header{}}
			allocs := testing.AllocsPerRun(200, func() {
				clear(w.h)
				delete(vars, VarOn)
				if err := h.ServeHTTP(w, r, benchNext); err != nil {
					t.Fatal(err)
				}
			})
			if len(w.h[fieldServerTiming]) != 1 || (len(tc.tao) > 0) != (len(w.h[fieldTAO]) == 1) {
				t.Fatalf("header %v: want one Server-Timing value and Timing-Allow-Origin %v", w.h, tc.tao)
			}
			// The race detector's pool drops values and its
			// instrumentation allocates.
			if allocs > 1 && !raceEnabled {
				t.Errorf("%v allocations a request, want at most 1 (the request with its trace and the header's entries)", allocs)
			}
		})
	}
}

// TestOuterTraceComposedOnce: a client trace already in the request's
// context still sees each upstream event once, however many timed requests
// came before: the handler's pooled hooks are not composed with it in place
// (httptrace.WithClientTrace does that to the trace it is given), which
// made every reuse call the outer hook once more.
func TestOuterTraceComposedOnce(t *testing.T) {
	var outer int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GetConn: func(string) { outer++ }})
	h := testHandler()
	r, vars := costRequest(ctx)
	for i := range 4 {
		upstream := i == 3
		w := &discard{h: http.Header{}}
		delete(vars, VarOn)
		err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if upstream {
				tr := httptrace.ContextClientTrace(r.Context())
				if tr == nil || tr.GetConn == nil {
					t.Fatal("no trace in the request's context")
				}
				tr.GetConn("origin:443")
			}
			return benchNext(w, r)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	if outer != 1 {
		t.Errorf("the outer trace's GetConn ran %d times for one upstream GetConn, want 1", outer)
	}
}

// TestTraceContext: the handlers inside see the timing's trace through
// httptrace, the request's other context values, and its cancellation.
func TestTraceContext(t *testing.T) {
	type key struct{}
	base, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()
	h := testHandler()
	r, _ := costRequest(base)
	var seen context.Context
	var trace *httptrace.ClientTrace
	err := h.ServeHTTP(&discard{h: http.Header{}}, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		seen, trace = r.Context(), httptrace.ContextClientTrace(r.Context())
		return benchNext(w, r)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if trace == nil || trace.GetConn == nil || trace.GotFirstResponseByte == nil {
		t.Fatalf("trace %v: want the timing's hooks", trace)
	}
	// httptrace.WithClientTrace adds a second value for net hooks, which
	// withTrace's context does not carry.
	if trace.DNSStart != nil || trace.DNSDone != nil || trace.ConnectStart != nil || trace.ConnectDone != nil {
		t.Error("the timing's trace has net hooks: withTrace must then use httptrace.WithClientTrace")
	}
	if clientTraceKey == nil {
		t.Error("httptrace's context key was not learned: every request pays a second allocation")
	}
	if v, _ := seen.Value(key{}).(string); v != "v" {
		t.Errorf("value %q through the trace's context, want v", v)
	}
	// A context derived from it is canceled with the request's.
	child, stop := context.WithCancel(seen)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from the handler's was not canceled with the request's")
	}
	if seen.Err() == nil {
		t.Error("the handler's context has no error after the request's was canceled")
	}
}

// TestFieldValues: every length, each size's allocation, gives back the
// bytes as they were, in slices capped at one element, the builder's
// buffer free to be reused.
func TestFieldValues(t *testing.T) {
	buf := make([]byte, maxHeaderLen+8)
	for n := 0; n <= len(buf); n++ {
		for _, tao := range []string{"", "https://app.example"} {
			for i := range buf[:n] {
				buf[i] = byte('a' + (i+n)%26)
			}
			want := string(buf[:n])
			fv := newFieldValues(nil, buf[:n], tao)
			if len(fv.st) != 1 || cap(fv.st) != 1 || fv.st[0] != want {
				t.Fatalf("length %d: %d values (cap %d) %q, want one, %q", n, len(fv.st), cap(fv.st), fv.st, want)
			}
			if (tao == "") != (fv.tao == nil) || (fv.tao != nil && fv.tao[0] != tao) {
				t.Fatalf("length %d: Timing-Allow-Origin %v, want %q", n, fv.tao, tao)
			}
			clear(buf)
			if fv.st[0] != want {
				t.Fatalf("length %d: the value changed with the builder's buffer", n)
			}
		}
	}
}

// TestFieldSlot: entries that fit the request's slot are made there, once:
// the values are the bytes as they were, still after the builder's buffer
// is reused, capped slices, and a second use of the slot (or entries too
// long for it) gets an allocation of its own and leaves the first values
// as they were.
func TestFieldSlot(t *testing.T) {
	buf := make([]byte, inlineFieldLen+8)
	for n := 1; n <= len(buf); n++ {
		for i := range buf[:n] {
			buf[i] = byte('a' + (i+n)%26)
		}
		want := string(buf[:n])
		slot := new(fieldSlot)
		fv := newFieldValues(slot, buf[:n], "https://app.example")
		inSlot := unsafe.StringData(fv.st[0]) == &slot.b[0]
		if inSlot != (n <= inlineFieldLen) {
			t.Fatalf("length %d: in the slot %v, want %v", n, inSlot, n <= inlineFieldLen)
		}
		if len(fv.st) != 1 || cap(fv.st) != 1 || fv.st[0] != want || fv.tao == nil || fv.tao[0] != "https://app.example" {
			t.Fatalf("length %d: values %q (cap %d), Timing-Allow-Origin %v", n, fv.st, cap(fv.st), fv.tao)
		}
		clear(buf)
		again := newFieldValues(slot, []byte("edge;dur=1"), "")
		if fv.st[0] != want || fv.tao[0] != "https://app.example" {
			t.Fatalf("length %d: the values changed with the builder's buffer or a second use of the slot", n)
		}
		if again.st[0] != "edge;dur=1" || (inSlot && unsafe.StringData(again.st[0]) == &slot.b[0]) {
			t.Fatalf("length %d: the second values %q reused a taken slot", n, again.st)
		}
	}
}

// TestTracedRequestFillsItsSizeClass: the slot takes what the request's
// copy leaves of its allocation's size class, so the header values cost
// no bytes more than the copy already did (a Request that grows in a later
// Go must shrink the slot, and this says so).
func TestTracedRequestFillsItsSizeClass(t *testing.T) {
	if inlineFieldLen < 180 {
		t.Errorf("the slot has %d bytes, less than a header with every entry (about 180)", inlineFieldLen)
	}
	if raceEnabled {
		return // the race detector's allocations count too
	}
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		tracedSink = new(tracedRequest)
	}
	runtime.ReadMemStats(&after)
	if got := (after.TotalAlloc - before.TotalAlloc) / n; got != 576 {
		t.Errorf("a tracedRequest (%d bytes) takes %d bytes of the heap, want 576 (a size class): adjust inlineFieldLen", unsafe.Sizeof(tracedRequest{}), got)
	}
}

var tracedSink *tracedRequest
