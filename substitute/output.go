package substitute

import (
	"bufio"
	"io"
	"sync"
)

// output buffers what the engine writes for the client. The engine writes
// many small pieces, and encode (outside) decides whether to compress from
// the size of the first write, now that Content-Length is gone. A response
// starts with a 64 KiB buffer, so the start of a body (an HTML page's head)
// leaves early; once it has written outGrowAfter bytes, the next time the
// small buffer fills it takes a 256 KiB buffer from a pool until it ends
// (a stream flushed event by event seldom fills it): a large body then
// costs a quarter of the writes to the client, each of which wakes the
// client and, through flow control, the origin (1 MB page of
// integration/bench-substitute.sh, side by side: +11% requests/s, -15%
// Caddy CPU a request; 16 KiB instead of 64 measured ~20% slower).
// Memory: 256 KiB more per large response in flight, none for the rest.
//
// The start of a body is held: a Flush sends nothing until outFirstWrite
// bytes are buffered (or the body ends), so that the first write
// downstream is at least that long. encode decides whether to compress
// from its first write alone (more than minimum_length, 512 by default,
// since Content-Length is gone), and reverse_proxy flushes after every
// read of an upstream without Content-Length: passing each flush on sent
// a first write of a few hundred bytes, and the whole body uncompressed.
// The cost is latency at the start only: bytes an upstream flushed before
// it has produced 4 KiB wait for more, or for its end. Server-sent events
// and incremental responses are not held (encode decides for them at the
// header, and each event must go out at once).
type output struct {
	dst   io.Writer
	small *bufio.Writer // kept with the pooled responseWriter
	big   *bufio.Writer // from bigOutputs once grown, else nil
	n     int64         // bytes written since reset
	hold  bool          // Flush waits for outFirstWrite bytes
}

const (
	outSmall      = 64 << 10
	outBig        = 256 << 10
	outGrowAfter  = 256 << 10
	outFirstWrite = 4 << 10
)

var bigOutputs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, outBig) }}

// reset starts a response whose body goes to dst, or, with dst nil, drops
// what an aborted response left and gives the big buffer back.
func (o *output) reset(dst io.Writer) {
	if o.big != nil {
		o.big.Reset(nil)
		bigOutputs.Put(o.big)
		o.big = nil
	}
	switch {
	case o.small != nil:
		o.small.Reset(dst)
	case dst != nil:
		o.small = bufio.NewWriterSize(dst, outSmall)
	}
	o.dst, o.n, o.hold = dst, 0, false
}

// holdStart makes Flush wait until outFirstWrite bytes are buffered.
func (o *output) holdStart() { o.hold = true }

// holding reports whether a Flush would send nothing yet.
func (o *output) holding() bool {
	if o.hold && o.n >= outFirstWrite {
		o.hold = false
	}
	return o.hold
}

// buf is the buffer in use.
func (o *output) buf() *bufio.Writer {
	if o.big != nil {
		return o.big
	}
	return o.small
}

func (o *output) Write(p []byte) (int, error) {
	if o.big == nil && o.n >= outGrowAfter && len(p) > o.small.Available() {
		// The small buffer would be written out now anyway: it goes
		// first, whole, then the big one takes over.
		if err := o.grow(); err != nil {
			return 0, err
		}
	}
	n, err := o.buf().Write(p)
	o.n += int64(n)
	return n, err
}

// WriteString takes the engine's replacements (it writes them with
// io.WriteString): without it each one was converted to a new []byte, an
// allocation per replacement (about 280 per response on the 1 MB page of
// integration/bench-substitute.sh, the most allocated object there).
func (o *output) WriteString(s string) (int, error) {
	if o.big == nil && o.n >= outGrowAfter && len(s) > o.small.Available() {
		if err := o.grow(); err != nil {
			return 0, err
		}
	}
	n, err := o.buf().WriteString(s)
	o.n += int64(n)
	return n, err
}

// grow sends the small buffer, whole, and takes a big one for the rest of
// the response.
func (o *output) grow() error {
	if err := o.small.Flush(); err != nil {
		return err
	}
	o.big = bigOutputs.Get().(*bufio.Writer)
	o.big.Reset(o.dst)
	return nil
}

// Flush sends what is buffered, unless the start of the body is held.
func (o *output) Flush() error {
	if o.holding() {
		return nil
	}
	return o.buf().Flush()
}

// end sends what is buffered: the body is complete.
func (o *output) end() error {
	o.hold = false
	return o.buf().Flush()
}
