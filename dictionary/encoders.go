package dictionary

import (
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/zstd"
	brrr "github.com/molecule-man/go-brrr"
)

// The content codings of RFC 9842.
const (
	codingDCZ = "dcz" // Zstandard with a raw dictionary
	codingDCB = "dcb" // Brotli with a compound dictionary
)

// Each dictionary-compressed body starts with a fixed header naming the
// dictionary (RFC 9842): the magic bytes, then its SHA-256. The
// dcz magic is a Zstandard skippable frame with a 32-byte payload, so
// plain zstd decoders skip it.
var (
	magicDCZ = [...]byte{0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00}
	magicDCB = [...]byte{0xff, 0x44, 0x43, 0x42}
)

// Window bounds. RFC 9842: a dcz decoder must accept a window of
// max(8 MiB, 1.25 × dictionary size) (up to 128 MiB), and the dcb window
// is at most 16 MiB (lgwin 24); compound-dictionary references reach past
// it, so the dictionary need not fit in it.
const (
	minDCZWindow = 1 << 20
	maxDCZWindow = 128 << 20
	dcbMaxLGWin  = 24
)

// deltaEncoder is what both libraries' streaming writers offer.
type deltaEncoder interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

// encoderConfig is what the handler's configuration says about encoders.
type encoderConfig struct {
	zstdLevel  zstd.EncoderLevel
	dcb        bool // dcb enabled: prepare a Brotli dictionary too
	dcbQuality int
	dcbLGWin   int
}

// encoderPools holds, per dictionary, the encoders prepared for it:
// preparing one (hashing the dictionary into the match finder's tables)
// costs about as much as compressing the dictionary itself, so they are
// pooled and reused by every response compressed against the dictionary.
// A pool is dropped with its dictionary when the store evicts it.
type encoderPools struct {
	zstd sync.Pool

	dcbOnce sync.Once
	dcbDict *brrr.PreparedDictionary
	dcbErr  error
	dcb     sync.Pool

	data []byte
	hash [hashSize]byte
	cfg  encoderConfig
}

func (p *encoderPools) init(data []byte, hash [hashSize]byte, cfg encoderConfig) {
	p.data, p.hash, p.cfg = data, hash, cfg
}

// dczWindow is the Zstandard window for a dictionary of n bytes: large
// enough that the end of a response as long as the dictionary still
// reaches the dictionary's start, and never larger than what RFC 9842
// obliges a client to accept.
func dczWindow(n int) int {
	allowed := max(8<<20, n+n/4)
	allowed = min(allowed, maxDCZWindow)
	limit := 1 << (bits.Len(uint(allowed)) - 1) // the power of two at or below
	want := 1 << bits.Len(uint(2*n-1|1))        // the power of two at or above 2n
	return max(minDCZWindow, min(want, limit))
}

// acquire returns an encoder for coding, prepared for the dictionary,
// from the pool or new; put gives it back. It fails before anything is
// written, so that the response can still go out without the dictionary.
func (p *encoderPools) acquire(coding string) (deltaEncoder, error) {
	switch coding {
	case codingDCZ:
		if e, ok := p.zstd.Get().(*zstd.Encoder); ok {
			return e, nil
		}
		return newZstdEncoder(p.data, p.cfg.zstdLevel)
	case codingDCB:
		if e, ok := p.dcb.Get().(*brrr.Writer); ok {
			return e, nil
		}
		return p.newBrotliEncoder()
	}
	return nil, fmt.Errorf("dictionary: unknown coding %q", coding)
}

// start writes the RFC 9842 header of coding (magic bytes, then the
// dictionary's SHA-256) to w and points enc at w for the body.
func (p *encoderPools) start(coding string, enc deltaEncoder, w io.Writer) error {
	magic := magicDCZ[:]
	if coding == codingDCB {
		magic = magicDCB[:]
	}
	if _, err := w.Write(magic); err != nil {
		return err
	}
	if _, err := w.Write(p.hash[:]); err != nil {
		return err
	}
	enc.Reset(w)
	return nil
}

// put returns an encoder to its pool, detached from its writer.
func (p *encoderPools) put(coding string, enc deltaEncoder) {
	enc.Reset(nil)
	switch coding {
	case codingDCZ:
		p.zstd.Put(enc)
	case codingDCB:
		p.dcb.Put(enc)
	}
}

func newZstdEncoder(dict []byte, level zstd.EncoderLevel) (*zstd.Encoder, error) {
	// Dictionary ID 0: the frame names no dictionary; the dcz header does.
	return zstd.NewWriter(nil,
		zstd.WithEncoderDictRaw(0, dict),
		zstd.WithWindowSize(dczWindow(len(dict))),
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1))
}

func (p *encoderPools) newBrotliEncoder() (*brrr.Writer, error) {
	p.dcbOnce.Do(func() { p.dcbDict, p.dcbErr = brrr.PrepareDictionary(p.data) })
	if p.dcbErr != nil {
		return nil, fmt.Errorf("dictionary: preparing Brotli dictionary: %w", p.dcbErr)
	}
	return brrr.NewWriterOptions(nil, p.cfg.dcbQuality, brrr.WriterOptions{
		Dictionaries: []*brrr.PreparedDictionary{p.dcbDict},
		LGWin:        p.cfg.dcbLGWin,
	})
}
