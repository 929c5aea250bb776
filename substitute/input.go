package substitute

import (
	"bufio"
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
// instead of 64 KiB of output. The buffer, a bufio.Writer as output's (a
// write at least a round long with nothing gathered goes straight
// through, uncopied), comes from a pool on the first write and goes back
// at the end of the response: inRound more bytes per substituted response
// in flight.
type input struct {
	dst io.Writer     // the engine stream
	w   *bufio.Writer // from inputs, nil until the first write
}

const inRound = 128 << 10

var inputs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, inRound) }}

// reset starts a body that goes to dst (nil: none), dropping what an
// aborted one left and giving the buffer back.
func (in *input) reset(dst io.Writer) {
	if in.w != nil {
		in.w.Reset(nil)
		inputs.Put(in.w)
		in.w = nil
	}
	in.dst = dst
}

// Write gathers p; a full round goes to the engine at once (bufio would
// hold it until the next write, which a body that fails next never makes:
// the round, and the response's header with it, would be lost).
func (in *input) Write(p []byte) (int, error) {
	if in.w == nil {
		in.w = inputs.Get().(*bufio.Writer)
		in.w.Reset(in.dst)
	}
	n, err := in.w.Write(p)
	if err == nil && in.w.Available() == 0 {
		err = in.w.Flush()
	}
	return n, err
}

// feed hands the engine what is gathered.
func (in *input) feed() error {
	if in.w == nil {
		return nil
	}
	return in.w.Flush()
}
