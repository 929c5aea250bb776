// Package dictionary is the http.handlers.dictionary module: Compression
// Dictionary Transport (RFC 9842) at the edge. It marks chosen responses
// as dictionaries (Use-As-Dictionary), keeps their bytes in a store bounded
// in bytes, and answers a later request that names one of them
// (Available-Dictionary) with the new response compressed against it:
// dcz (Zstandard, klauspost/compress) or dcb (Brotli, go-brrr). Every other
// response is left to Caddy's encode, which the handler sits inside of.
//
//	encode br gzip
//	dictionary /assets/* {
//	    match /assets/app.*.js
//	}
//
// See docs/dictionary.md for the behaviour, the security rules and figures.
package dictionary

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Defaults and bounds.
const (
	DefaultMaxSize        = 4 << 20
	DefaultStoreSize      = 64 << 20
	DefaultDeltaCacheSize = 16 << 20
	DefaultDCBQuality     = 5
	DefaultDCBWindow      = 20
	DefaultMaxEncoders    = 32
	// DefaultEncoderWriteIdle bounds how long a client that stops reading
	// holds an encoder slot.
	DefaultEncoderWriteIdle = caddy.Duration(10 * time.Second)
	// DeltaCacheOff in DeltaCacheSize turns the delta cache off.
	DeltaCacheOff = -1

	minMaxSize = 1 << 10
	// maxMaxSize keeps every dictionary within the dcz window a client
	// must accept (RFC 9842: up to 128 MiB) with room for the response.
	maxMaxSize   = 64 << 20
	maxStoreSize = 64 << 30
	maxDests     = 16
	maxIDLen     = 1024
	maxEncoders  = 4096

	minEncoderWriteIdle = caddy.Duration(100 * time.Millisecond)
	maxEncoderWriteIdle = caddy.Duration(time.Hour)
	maxEncoderMinRate   = 1 << 30
)

// Handler marks responses as compression dictionaries and compresses later
// responses against them.
type Handler struct {
	// Match is the path pattern sent in Use-As-Dictionary, and the paths
	// whose responses are marked: "/assets/app.*.js". Only "*" wildcards;
	// it must start with "/". Required.
	Match string `json:"match"`

	// MatchDest lists the request destinations (Sec-Fetch-Dest: "script",
	// "style", …) the dictionary is for; sent as match-dest. Default: any.
	MatchDest []string `json:"match_dest,omitempty"`

	// ID is sent as the dictionary's id (the browser sends it back in
	// Dictionary-ID). Default: none.
	ID string `json:"id,omitempty"`

	// Encodings are the dictionary codings offered, in order of
	// preference: "dcz", "dcb". Default: dcz then dcb.
	Encodings []string `json:"encodings,omitempty"`

	// MaxSize is the largest response, in bytes, that is marked and
	// stored as a dictionary. Default: 4 MiB; at most 64 MiB.
	MaxSize int64 `json:"max_size,omitempty"`

	// StoreSize bounds the bytes the dictionary store counts (LRU; with
	// dcb, a dictionary counts its Brotli tables too), and also the bytes
	// in-flight responses may buffer to become dictionaries. Handlers
	// configured alike share one store, across reloads. Default: 64 MiB.
	StoreSize int64 `json:"store_size,omitempty"`

	// DeltaCacheSize bounds the bytes of compressed responses kept to be
	// sent again for the same dictionary and strong ETag (LRU). Default:
	// 16 MiB; -1 turns the cache off.
	DeltaCacheSize int64 `json:"delta_cache_size,omitempty"`

	// ZstdLevel is the dcz encoder level: fastest, default, better or
	// best. Default: default.
	ZstdLevel ZstdLevel `json:"zstd_level,omitempty"`

	// DCBQuality is the dcb Brotli quality, 2..11 (compound dictionaries
	// need 2 or more). Default: 5.
	DCBQuality int `json:"dcb_quality,omitempty"`

	// DCBWindow is log2 of the dcb Brotli window, 10..24 (RFC 9842 allows
	// at most 16 MiB). Default: 20 (1 MiB, as `encode br`): references
	// into the dictionary reach past the window, so a larger one only
	// helps within responses over 1 MiB; a pooled writer keeps twice it.
	DCBWindow int `json:"dcb_window,omitempty"`

	// MaxEncoders bounds the responses being compressed against a
	// dictionary at once (a response from the delta cache needs no
	// encoder). Each holds a prepared encoder of several MiB (see
	// docs/dictionary.md) for as long as its client takes to read it; past
	// the bound, responses go to encode (miss reason busy). Default: 32.
	MaxEncoders int `json:"max_encoders,omitempty"`

	// EncoderWriteIdle bounds how long a write of a response being
	// compressed against a dictionary may stall: past it, the response is
	// cut and its encoder slot given back, so that clients that stop
	// reading cannot hold the max_encoders slots. While the response holds
	// its slot, this and EncoderMinRate tighten the server's write_idle
	// timeout and rate (whichever is stricter applies; its write timeout,
	// a hard deadline, still does). 100ms..1h; default: 10s.
	EncoderWriteIdle caddy.Duration `json:"encoder_write_idle,omitempty"`

	// EncoderMinRate is the rate, in bytes per second, at which a
	// dictionary-compressed response must go out, on average, once the
	// first EncoderWriteIdle has passed: a client reading just often
	// enough to keep every write under EncoderWriteIdle is then cut too.
	// The rate counts what the handlers below produce as well: a response
	// from an upstream slower than it is cut, whatever its client does.
	// Default: none (0).
	EncoderMinRate int64 `json:"encoder_min_rate,omitempty"`

	match pattern
	store *store
	// encoderSlots holds a token per encoder in use (MaxEncoders slots).
	encoderSlots chan struct{}
	storeKey     string
	deltas       *lru[deltaKey, []byte]
	enc          encoderConfig
	logger       *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.dictionary",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets the defaults and creates the stores.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if len(h.Encodings) == 0 {
		h.Encodings = []string{codingDCZ, codingDCB}
	}
	lowerAll(h.Encodings)
	if h.MaxSize == 0 {
		h.MaxSize = DefaultMaxSize
	}
	if h.StoreSize == 0 {
		h.StoreSize = DefaultStoreSize
	}
	if h.DeltaCacheSize == 0 {
		h.DeltaCacheSize = DefaultDeltaCacheSize
	}
	if h.ZstdLevel == "" {
		h.ZstdLevel = ZstdDefault
	}
	if h.DCBQuality == 0 {
		h.DCBQuality = DefaultDCBQuality
	}
	if h.DCBWindow == 0 {
		h.DCBWindow = DefaultDCBWindow
	}
	if h.MaxEncoders == 0 {
		h.MaxEncoders = DefaultMaxEncoders
	}
	if h.EncoderWriteIdle == 0 {
		h.EncoderWriteIdle = DefaultEncoderWriteIdle
	}
	if err := h.Validate(); err != nil { // before sizing anything by the values
		return err
	}
	h.match = pattern(h.Match)
	h.enc = encoderConfig{
		zstdLevel:  zstdLevel(h.ZstdLevel),
		dcb:        h.offers(codingDCB),
		dcbQuality: h.DCBQuality,
		dcbLGWin:   h.DCBWindow,
	}
	h.encoderSlots = make(chan struct{}, h.MaxEncoders)
	if h.DeltaCacheSize > 0 {
		h.deltas = newLRU[deltaKey, []byte](h.DeltaCacheSize, nil)
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("dictionary: registering metrics: %w", err)
	}
	// Last, so that nothing can fail once the store is taken (Cleanup
	// gives it back).
	h.storeKey = h.storeIdentity()
	v, _, err := stores.LoadOrNew(h.storeKey, func() (caddy.Destructor, error) {
		return newStore(h.StoreSize), nil
	})
	if err != nil {
		return fmt.Errorf("dictionary: store: %w", err)
	}
	h.store = v.(*store)
	return nil
}

// stores holds the dictionary stores of every loaded config, by what
// shapes them: a config reload (which provisions new handlers before it
// cleans up the old ones) keeps the dictionaries browsers hold, and
// handlers configured alike share one store. A store goes when the last
// handler using it is cleaned up.
var stores = caddy.NewUsagePool()

// storeIdentity is the key of h's store in stores: everything that decides
// what a stored dictionary is and how it is compressed against.
func (h *Handler) storeIdentity() string {
	b, _ := json.Marshal([]any{h.Match, h.MatchDest, h.Encodings, h.MaxSize, h.StoreSize, h.ZstdLevel, h.DCBQuality, h.DCBWindow})
	return string(b)
}

// Validate refuses a configuration that makes no sense, with the checks
// the Caddyfile parser makes too (options.go).
func (h *Handler) Validate() error {
	for _, err := range []error{
		checkPattern(h.Match),
		checkMatchDest(h.MatchDest),
		checkID(h.ID),
		checkEncodings(h.Encodings),
		checkMaxSize(h.MaxSize),
		checkStoreSize(h.StoreSize, h.MaxSize, h.offers(codingDCB)),
		checkDeltaCacheSize(h.DeltaCacheSize),
		checkZstdLevel(h.ZstdLevel),
		checkDCBQuality(h.DCBQuality),
		checkDCBWindow(h.DCBWindow),
		checkMaxEncoders(h.MaxEncoders),
		checkEncoderWriteIdle(h.EncoderWriteIdle),
		checkEncoderMinRate(h.EncoderMinRate),
	} {
		if err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
	}
	return nil
}

// Cleanup gives the store back; the last handler using it drops it.
func (h *Handler) Cleanup() error {
	if h.store != nil {
		h.store = nil
		if _, err := stores.Delete(h.storeKey); err != nil {
			return fmt.Errorf("dictionary: dropping the store: %w", err)
		}
	}
	return nil
}

// takeEncoderSlot takes one of the MaxEncoders slots, or reports false
// when all are in use (the response then goes without the dictionary).
func (h *Handler) takeEncoderSlot() bool {
	select {
	case h.encoderSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

// releaseEncoderSlot gives back a slot takeEncoderSlot took.
func (h *Handler) releaseEncoderSlot() { <-h.encoderSlots }

// offers reports whether coding is among the handler's encodings.
func (h *Handler) offers(coding string) bool {
	for _, e := range h.Encodings {
		if e == coding {
			return true
		}
	}
	return false
}

func zstdLevel(l ZstdLevel) zstd.EncoderLevel {
	switch l {
	case ZstdFastest:
		return zstd.SpeedFastest
	case ZstdBetter:
		return zstd.SpeedBetterCompression
	case ZstdBest:
		return zstd.SpeedBestCompression
	}
	return zstd.SpeedDefault
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
