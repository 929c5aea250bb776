package substitute

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	brrr "github.com/molecule-man/go-brrr"
	"go.uber.org/zap"
)

// encoding is a Content-Encoding that substitute can decode.
type encoding uint8

const (
	identity encoding = iota
	encGzip
	encDeflate
	encBrotli
	encZstd
	unknownEncoding
)

// parseEncoding reads a Content-Encoding header. Several codings, or one
// that is not understood, give unknownEncoding: such bodies pass untouched.
func parseEncoding(values []string) encoding {
	if len(values) == 0 {
		return identity
	}
	if len(values) > 1 {
		return unknownEncoding
	}
	v := strings.TrimSpace(values[0])
	switch {
	case v == "" || strings.EqualFold(v, "identity"):
		return identity
	case strings.EqualFold(v, "gzip") || strings.EqualFold(v, "x-gzip"):
		return encGzip
	case strings.EqualFold(v, "deflate"):
		return encDeflate
	case strings.EqualFold(v, "br"):
		return encBrotli
	case strings.EqualFold(v, "zstd"):
		return encZstd
	}
	return unknownEncoding
}

// testHookDecoded, when set by a test, sees every decoded write.
var testHookDecoded func([]byte)

var (
	errAborted  = errors.New("substitute: response aborted")
	errTrailing = errors.New("bytes after the end of the compressed stream")
)

// decodeError means the client must not take the body for complete: the
// upstream body is not what its Content-Encoding says, or decoding it
// panicked. The response is aborted (see ServeHTTP), as reverse_proxy
// aborts one whose upstream body is cut short.
//
// What counts as not what the Content-Encoding says:
//   - a stream cut short (truncated), whatever the framing that ended it;
//   - corrupt data;
//   - any byte after the end of a complete stream (trailing bytes). The
//     body then is not a gzip, deflate, br or zstd stream, and accepting it
//     would make the outcome depend on where upstream's writes happen to
//     cut the body. Concatenated gzip members and zstd frames are part of
//     those formats, not trailing bytes.
//
// An empty body is an empty body under any coding, as clients take it.
type decodeError struct{ err error }

func (e *decodeError) Error() string {
	return "substitute: decoding the upstream body: " + e.err.Error()
}
func (e *decodeError) Unwrap() error { return e.err }

// isDecodeError reports whether err means the response must be aborted.
func isDecodeError(err error) bool {
	var de *decodeError
	return errors.As(err, &de)
}

// decoder turns the push-style writes of a compressed body into the
// pull-style reads the decompressors need. The decompressor runs in its own
// goroutine, but in lockstep with the writer: Write returns only when the
// decompressor has consumed the chunk and asks for more, by which time it
// has written everything it could decode. So the two goroutines never touch
// the response at the same time, and a Flush after Write flushes everything
// decoded so far (SSE and streaming through a compressed upstream).
type decoder struct {
	in     chan []byte
	ack    chan struct{}
	done   chan struct{}
	err    error // set before done is closed
	logger *zap.Logger

	// Owned by the decompressor goroutine (out until done is closed).
	out      decodedOutput
	src      *bufio.Reader // what gzip and deflate read through (see buffered)
	cur      []byte
	peek     []byte
	pending  bool // cur came from a Write still waiting for its ack
	aborted  bool // set before in is closed
	sawInput bool // a byte of the body arrived
	sawAbort bool // the decompressor was told to stop (errAborted)
}

// newDecoder starts decoding enc into dst. logger gets decode failures and
// panics.
func newDecoder(enc encoding, dst io.Writer, logger *zap.Logger) *decoder {
	if logger == nil {
		logger = zap.NewNop()
	}
	d := &decoder{in: make(chan []byte), ack: make(chan struct{}), done: make(chan struct{}), out: decodedOutput{Writer: dst}, logger: logger}
	go d.run(enc)
	return d
}

// decodedOutput is where the decompressor writes. It notes a failed write,
// so that a client going away is not taken for a corrupt upstream body.
type decodedOutput struct {
	io.Writer
	failed bool
}

func (o *decodedOutput) Write(p []byte) (int, error) {
	if testHookDecoded != nil {
		testHookDecoded(p)
	}
	n, err := o.Writer.Write(p)
	if err != nil {
		o.failed = true
	}
	return n, err
}

// run decodes until the body ends and sets d.err. A panic here (in a
// decompressor or in the engine it writes to) would take the whole process
// down, not one request: it is recovered, logged with its stack, counted,
// and aborts this response only.
func (d *decoder) run(enc encoding) {
	defer close(d.done)
	defer func() {
		if v := recover(); v != nil {
			metrics.panics.Inc()
			d.logger.Error("panic decoding an upstream body; response aborted",
				zap.Any("panic", v), zap.String("stack", string(debug.Stack())))
			d.err = &decodeError{fmt.Errorf("panic: %v", v)}
		}
	}()
	err := d.decode(enc)
	if err == nil {
		err = d.trailing()
	}
	if d.src != nil {
		d.src.Reset(nil)
		bufferedSources.Put(d.src)
		d.src = nil
	}
	switch {
	case err == nil, d.sawAbort, errors.Is(err, errAborted):
	case d.out.failed:
		// Writing the decoded body failed: the client went away, which is
		// not the upstream's fault.
	case !d.sawInput:
		err = nil // an empty body
	default:
		metrics.decodeFailures.Inc()
		d.logger.Warn("upstream body failed to decode; response aborted",
			zap.String("content_encoding", enc.String()), zap.Error(err))
		err = &decodeError{fmt.Errorf("%s: %w", enc, err)}
	}
	d.err = err
}

// decode runs the decompressor for enc over the body, into d.out.
func (d *decoder) decode(enc encoding) error {
	dst := &d.out
	var err error
	switch enc {
	case encGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		if zr == nil {
			zr = new(gzip.Reader)
		}
		if err = zr.Reset(d.buffered()); err == nil {
			_, err = copyPooled(dst, zr)
		}
		gzipReaders.Put(zr)
	case encDeflate:
		err = d.runDeflate(dst)
	case encBrotli:
		if err = d.checkBrotliWindow(); err != nil {
			break
		}
		br, _ := brotliReaders.Get().(*brrr.Reader)
		if br == nil {
			br = brrr.NewReader(d)
		} else {
			br.Reset(d)
		}
		_, err = copyPooled(dst, br)
		brotliReaders.Put(br)
	case encZstd:
		zr, _ := zstdReaders.Get().(*zstd.Decoder)
		if zr == nil {
			// RFC 9659: HTTP zstd windows are at most 8 MB; a synchronous
			// decoder keeps this goroutine the only one touching dst.
			zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20))
			if err != nil {
				break
			}
		}
		if err = zr.Reset(d); err == nil {
			_, err = copyPooled(dst, zr)
		}
		zstdReaders.Put(zr)
	}
	return err
}

// maxBrotliWindowBits bounds the window a br stream may declare: 2^23 (8
// MiB less 16 bytes), zstd's bound (RFC 9659). A br stream may declare up
// to 16 MiB (lgwin 24), and go-brrr's reader grows its ring buffer up to
// the window as the output (or one meta-block's declared length) needs:
// 16 MiB per response at lgwin 24, whatever substitute's other bounds.
const maxBrotliWindowBits = 23

// checkBrotliWindow refuses a br stream whose window exceeds
// maxBrotliWindowBits, as zstd.WithDecoderMaxWindow refuses a zstd frame:
// the response aborts as for any body that cannot be decoded. The first
// byte holds the window (RFC 7932 §9.1); it is read ahead and put back.
func (d *decoder) checkBrotliWindow() error {
	b, err := d.ReadByte()
	if err != nil {
		return err
	}
	d.peek = append(d.peek[:0], b)
	bits, ok := brotliWindowBits(b)
	if !ok {
		return errors.New("invalid window bits (large-window brotli is not RFC 7932)")
	}
	if bits > maxBrotliWindowBits {
		return fmt.Errorf("window of %d MiB exceeds substitute's bound of %d MiB: compress with a window of at most 2^%d (lgwin %d, brotli -w %d)",
			1<<(bits-20), 1<<(maxBrotliWindowBits-20), maxBrotliWindowBits, maxBrotliWindowBits, maxBrotliWindowBits)
	}
	return nil
}

// brotliWindowBits reads WBITS from the first byte of a br stream (RFC 7932
// §9.1); false for the large-window marker of the non-standard extension.
func brotliWindowBits(b byte) (int, bool) {
	if b&1 == 0 {
		return 16, true
	}
	if n := b >> 1 & 7; n != 0 {
		return 17 + int(n), true
	}
	switch n := b >> 4 & 7; n {
	case 0:
		return 17, true
	case 1:
		return 0, false
	default:
		return 8 + int(n), true
	}
}

// trailing reads what follows a complete stream: nothing (io.EOF) is
// fine, anything else is errTrailing, whichever write it comes in. The
// decompressors stop at the end of their stream (brotli reports excess
// input it already read; gzip and zstd read on for another member or
// frame), so bytes after it are still here, or yet to come.
func (d *decoder) trailing() error {
	if len(d.peek) > 0 || len(d.cur) > 0 || d.src != nil && d.src.Buffered() > 0 {
		return errTrailing
	}
	switch err := d.fill(); err {
	case nil:
		return errTrailing
	case io.EOF:
		return nil
	default:
		return err
	}
}

func (e encoding) String() string {
	switch e {
	case identity:
		return "identity"
	case encGzip:
		return "gzip"
	case encDeflate:
		return "deflate"
	case encBrotli:
		return "br"
	case encZstd:
		return "zstd"
	}
	return "unknown"
}

// runDeflate decodes "deflate", which HTTP defines as the zlib format; raw
// deflate streams, which some servers send instead, are recognised by their
// missing zlib header and decoded too.
func (d *decoder) runDeflate(dst io.Writer) error {
	var hdr [2]byte
	for i := range hdr {
		b, err := d.ReadByte()
		if err != nil {
			return err
		}
		hdr[i] = b
	}
	d.peek = append(d.peek[:0], hdr[:]...)
	var err error
	if hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		zr, _ := zlibReaders.Get().(io.ReadCloser)
		if zr == nil {
			zr, err = zlib.NewReader(d.buffered())
		} else {
			err = zr.(zlib.Resetter).Reset(d.buffered(), nil)
		}
		if err != nil {
			return err
		}
		_, err = copyPooled(dst, zr)
		zlibReaders.Put(zr)
		return err
	}
	fr, _ := flateReaders.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(d.buffered())
	} else if err = fr.(flate.Resetter).Reset(d.buffered(), nil); err != nil {
		return err
	}
	_, err = copyPooled(dst, fr)
	flateReaders.Put(fr)
	return err
}

// Read hands the decompressor the bytes of the current Write, acking each
// chunk when it is used up and it needs the next.
func (d *decoder) Read(p []byte) (int, error) {
	if len(d.peek) > 0 {
		n := copy(p, d.peek)
		d.peek = d.peek[n:]
		return n, nil
	}
	if err := d.fill(); err != nil {
		return 0, err
	}
	n := copy(p, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

// buffered is d behind a pooled bufio.Reader, for gzip and deflate:
// klauspost's flate decodes from a *bufio.Reader with ReadByte calls it can
// inline, and from any other io.ByteReader one interface call per byte (its
// generic path; the 1 MB page from a gzip origin, under wrk: that path and
// ReadByte were 2.5 of its 3.8 s decoding). bufio reads from d only when
// it has handed out every byte it holds, so the decompressor still asks
// for the next Write only once it has used this one up; bytes it read
// ahead past the end of the stream are trailing (see trailing).
func (d *decoder) buffered() *bufio.Reader {
	if d.src == nil {
		d.src = bufferedSources.Get().(*bufio.Reader)
	}
	d.src.Reset(d)
	return d.src
}

var bufferedSources = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// ReadByte serves the decoders' own header checks (deflate's zlib header,
// brotli's window), byte by byte.
func (d *decoder) ReadByte() (byte, error) {
	if len(d.peek) > 0 {
		b := d.peek[0]
		d.peek = d.peek[1:]
		return b, nil
	}
	if err := d.fill(); err != nil {
		return 0, err
	}
	b := d.cur[0]
	d.cur = d.cur[1:]
	return b, nil
}

func (d *decoder) fill() error {
	for len(d.cur) == 0 {
		if d.pending {
			d.pending = false
			d.ack <- struct{}{}
		}
		chunk, ok := <-d.in
		if !ok {
			if d.aborted {
				d.sawAbort = true
				return errAborted
			}
			return io.EOF
		}
		d.cur, d.pending, d.sawInput = chunk, true, true
	}
	return nil
}

// Write passes p to the decompressor and waits until it has used it all.
func (d *decoder) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case d.in <- p:
	case <-d.done:
		return 0, d.doneErr()
	}
	select {
	case <-d.ack:
		return len(p), nil
	case <-d.done:
		// Decoding failed, on this chunk or on trailing bytes in it: the
		// decoder reads on after the end of the stream, so it never ends
		// early on success.
		return 0, d.doneErr()
	}
}

func (d *decoder) doneErr() error {
	if d.err != nil {
		return d.err
	}
	return io.ErrShortWrite
}

// Close ends the input and waits for the decompressor to finish. With abort
// set the decompressor stops without writing anything more. The error is a
// *decodeError (see isDecodeError) when the response must be aborted,
// errAborted, or an error writing the decoded body (the client went away).
func (d *decoder) Close(abort bool) error {
	select {
	case <-d.done:
		return d.err
	default:
	}
	d.aborted = abort
	close(d.in)
	<-d.done
	return d.err
}

var (
	gzipReaders   sync.Pool
	zlibReaders   sync.Pool
	flateReaders  sync.Pool
	brotliReaders sync.Pool
	zstdReaders   sync.Pool
)
