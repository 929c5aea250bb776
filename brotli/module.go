// Package caddybrotli provides the http.encoders.br module: Brotli compression for
// Caddy's encode handler, built on github.com/molecule-man/go-brrr (pure Go,
// a port of Google's reference encoder: see docs/br.md for the choice).
//
//	encode br gzip
//
// serves Brotli to clients that accept it and gzip to the rest.
package caddybrotli

import (
	"fmt"

	brrr "github.com/molecule-man/go-brrr"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

func init() {
	caddy.RegisterModule(Brotli{})
}

const (
	// DefaultQuality compresses minified scripts to about 10% fewer bytes
	// than Caddy's default gzip at a speed fit for dynamic responses.
	DefaultQuality = 5
	// DefaultWindow is 2^20 = 1 MiB: as small as a busy edge server wants
	// its pooled encoders (each keeps twice the window) and the phones
	// decoding it want their buffers, yet larger than any single script
	// or page of the benchmark corpus, so it costs no bytes there.
	DefaultWindow = 20

	minQuality, maxQuality = brrr.BestSpeed, brrr.BestCompression
	minWindow, maxWindow   = 10, 24
)

// Brotli can create Brotli encoders for the encode handler.
type Brotli struct {
	// Compression quality, from 0 (fastest) to 11 (smallest output).
	// Default: 5. Every step above 5 costs speed much faster than it
	// saves bytes; 10 and 11 suit only pre-compressed static files.
	Quality *int `json:"quality,omitempty"`

	// Base-2 logarithm of the sliding window size, from 10 (1 KiB)
	// to 24 (16 MiB). Default: 20 (1 MiB). A pooled encoder that has
	// compressed a response of more than one write keeps a buffer of
	// twice the window (2 MiB at 20, 8 MiB at the library's 22); a
	// larger window only saves bytes on responses larger than 1 MiB.
	Window int `json:"window,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Brotli) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.encoders.br",
		New: func() caddy.Module { return new(Brotli) },
	}
}

// Provision sets the defaults. It must not be skipped: `encode br` creates
// the module without UnmarshalCaddyfile, so its JSON is a bare `{}`.
func (b *Brotli) Provision(caddy.Context) error {
	if b.Quality == nil {
		quality := DefaultQuality
		b.Quality = &quality
	}
	if b.Window == 0 {
		b.Window = DefaultWindow
	}
	return nil
}

// Validate refuses a quality or window the format does not have.
func (b *Brotli) Validate() error {
	if err := checkQuality(*b.Quality); err != nil {
		return fmt.Errorf("br: %w", err)
	}
	if err := checkWindow(b.Window); err != nil {
		return fmt.Errorf("br: %w", err)
	}
	return nil
}

// AcceptEncoding returns the name of the encoding as
// used in the Accept-Encoding request headers.
func (*Brotli) AcceptEncoding() string { return "br" }

// NewEncoder returns a new Brotli writer. The encode handler pools it and
// calls Reset before each response, which keeps the writer's buffers, so
// a warm pool compresses without allocating.
//
// At qualities 10 and 11 go-brrr runs a second worker goroutine per
// writer when GOMAXPROCS >= 2.
func (b *Brotli) NewEncoder() encode.Encoder {
	w, err := brrr.NewWriterOptions(nil, *b.Quality, brrr.WriterOptions{LGWin: b.Window})
	if err != nil {
		// Validate has refused every quality and window go-brrr refuses.
		panic(fmt.Sprintf("br: %v", err))
	}
	return w
}

func checkQuality(quality int) error {
	if quality < minQuality || quality > maxQuality {
		return fmt.Errorf("quality %d: must be %d..%d (0 fastest, 11 smallest; default %d)",
			quality, minQuality, maxQuality, DefaultQuality)
	}
	return nil
}

func checkWindow(window int) error {
	if window < minWindow || window > maxWindow {
		return fmt.Errorf("window %d: must be %d..%d (log2 of the window in bytes, e.g. 22 = 4 MiB; default %d)",
			window, minWindow, maxWindow, DefaultWindow)
	}
	return nil
}

// Interface guards
var (
	_ encode.Encoding       = (*Brotli)(nil)
	_ caddy.Provisioner     = (*Brotli)(nil)
	_ caddy.Validator       = (*Brotli)(nil)
	_ caddyfile.Unmarshaler = (*Brotli)(nil)
)
