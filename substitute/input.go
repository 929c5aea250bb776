package substitute

import (
	"io"
	"sync"
)

// input gathers the body's writes for the engine. reverse_proxy writes
// what each read of the upstream returns, 32 KiB at most, and between two
// writes the kernel's socket copies, the other connections and the other
// processes of the machine run on the same core: each engine Write then
// starts with its tables and DFA states out of the L2 cache. Inside Caddy
// under wrk the engine costs twice its benchmark (bench-profile.sh: 560 µs
// a request on the 1 MB page of bench-substitute.sh, against 265), as it
// does in BenchmarkWrkRulesChunks with 4 MiB read between 32 KiB writes
// (555 µs; 347 in 128 KiB writes). Rounds of inRound cost one more copy
// of the body: BenchmarkHandler (caches hot) +5%, BenchmarkHandlerEvicted
// (cold at every write, as in Caddy) -6%.
//
// Nothing waits longer than the writer asks: Flush (reverse_proxy's, for
// streams and bodies without Content-Length) hands the engine what is
// gathered before the output flushes, and the end of the body does too;
// a body with Content-Length reaches the client after 128 KiB of input
// instead of 64 KiB of output. The buffer comes from a pool on the first
// write and goes back at the end of the response: inRound more bytes per
// substituted response in flight.
type input struct {
	dst io.Writer // the engine stream
	buf *[]byte   // from inputs, nil until the first write
	err error     // the first error of dst, returned from then on
}

const inRound = 128 << 10

var inputs = sync.Pool{New: func() any { b := make([]byte, 0, inRound); return &b }}

// reset starts a body that goes to dst (nil: none), dropping what an
// aborted one left and giving the buffer back.
func (in *input) reset(dst io.Writer) {
	if in.buf != nil {
		*in.buf = (*in.buf)[:0]
		inputs.Put(in.buf)
		in.buf = nil
	}
	in.dst, in.err = dst, nil
}

// Write gathers p; a full round goes to the engine. A write at least a
// round long with nothing gathered goes straight through, uncopied.
func (in *input) Write(p []byte) (int, error) {
	if in.err != nil {
		return 0, in.err
	}
	n := len(p)
	if in.buf == nil {
		if len(p) >= inRound {
			return in.pass(p, n)
		}
		in.buf = inputs.Get().(*[]byte)
	}
	for len(p) > 0 {
		b := *in.buf
		if len(b) == 0 && len(p) >= inRound {
			return in.pass(p, n)
		}
		k := copy(b[len(b):cap(b)], p)
		*in.buf, p = b[:len(b)+k], p[k:]
		if len(*in.buf) == cap(*in.buf) {
			if err := in.feed(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// pass writes p, n bytes of the caller's, straight to the engine.
func (in *input) pass(p []byte, n int) (int, error) {
	if _, err := in.dst.Write(p); err != nil {
		in.err = err
		return 0, err
	}
	return n, nil
}

// feed hands the engine what is gathered.
func (in *input) feed() error {
	if in.err != nil {
		return in.err
	}
	if in.buf == nil || len(*in.buf) == 0 {
		return nil
	}
	_, in.err = in.dst.Write(*in.buf)
	*in.buf = (*in.buf)[:0]
	return in.err
}
