package dictionary

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	brrr "github.com/molecule-man/go-brrr"

	"github.com/caddy-edgekit/edgekit/internal/enum"
)

// Each bound and enumeration is checked by one function here, called by both
// the Caddyfile parser (so `caddy adapt` points at the offending line) and
// Validate (for JSON configs), so the two can never disagree. The errors
// name the option; callers prefix the module.

// ZstdLevel is the Zstandard encoder level of dcz.
type ZstdLevel string

// The Zstandard levels klauspost/compress offers.
const (
	ZstdFastest ZstdLevel = "fastest"
	ZstdDefault ZstdLevel = "default"
	ZstdBetter  ZstdLevel = "better"
	ZstdBest    ZstdLevel = "best"
)

func parseZstdLevel(s string) (ZstdLevel, error) {
	v, err := enum.Parse(s, ZstdFastest, ZstdDefault, ZstdBetter, ZstdBest)
	if err != nil {
		return "", fmt.Errorf("zstd_level %w", err)
	}
	return v, nil
}

func checkZstdLevel(l ZstdLevel) error {
	_, err := parseZstdLevel(string(l))
	return err
}

func checkMatchDest(dests []string) error {
	if len(dests) > maxDests {
		return fmt.Errorf("match_dest: %d destinations, at most %d", len(dests), maxDests)
	}
	for _, d := range dests {
		if err := checkToken("match_dest", d, 64); err != nil {
			return fmt.Errorf("%w (a Sec-Fetch-Dest value such as script or style)", err)
		}
	}
	return nil
}

func checkID(id string) error {
	if id == "" {
		return nil
	}
	return checkToken("id", id, maxIDLen)
}

func checkEncodings(encodings []string) error {
	if len(encodings) == 0 || len(encodings) > 2 {
		return fmt.Errorf("encodings: want dcz, dcb or both, in order of preference")
	}
	for i, e := range encodings {
		if e != codingDCZ && e != codingDCB {
			return fmt.Errorf("encodings: %q: must be dcz or dcb", e)
		}
		if i > 0 && encodings[0] == e {
			return fmt.Errorf("encodings: %s listed twice", e)
		}
	}
	return nil
}

func checkMaxSize(n int64) error {
	if n < minMaxSize || n > maxMaxSize {
		return fmt.Errorf("max_size %d: must be %d..%d bytes (1KiB..64MiB)", n, minMaxSize, maxMaxSize)
	}
	return nil
}

// checkStoreSize needs max_size and the encodings too: the store must hold
// one dictionary of max_size, counted as the store counts it.
func checkStoreSize(n, maxSize int64, dcb bool) error {
	if need := dictCost(int(maxSize), dcb) + 1024; n < need || n > maxStoreSize {
		return fmt.Errorf("store_size %d: must hold one dictionary of max_size (%d): at least %d bytes (with dcb, the Brotli tables count 320KiB + 3.2 bytes per byte), at most 64GiB", n, maxSize, need)
	}
	return nil
}

func checkDeltaCacheSize(n int64) error {
	if n < DeltaCacheOff || n > maxStoreSize {
		return fmt.Errorf("delta_cache_size %d: must be a size up to 64GiB, or off", n)
	}
	return nil
}

func checkDCBQuality(q int) error {
	if q < 2 || q > brrr.BestCompression {
		return fmt.Errorf("dcb_quality %d: must be 2..11 (Brotli compound dictionaries need 2 or more; default %d)", q, DefaultDCBQuality)
	}
	return nil
}

func checkDCBWindow(w int) error {
	if w < 10 || w > dcbMaxLGWin {
		return fmt.Errorf("dcb_window %d: must be 10..24 (log2 of bytes; RFC 9842 allows at most 16 MiB; default %d)", w, DefaultDCBWindow)
	}
	return nil
}

func checkMaxEncoders(n int) error {
	if n < 1 || n > maxEncoders {
		return fmt.Errorf("max_encoders %d: must be 1..%d (responses compressed against a dictionary at once, each holding an encoder of several MiB; default %d)", n, maxEncoders, DefaultMaxEncoders)
	}
	return nil
}

func checkEncoderWriteIdle(d caddy.Duration) error {
	if d < minEncoderWriteIdle || d > maxEncoderWriteIdle {
		return fmt.Errorf("encoder_write_idle %s: must be 100ms..1h (how long a client may stall a response holding an encoder slot; default %s)", time.Duration(d), time.Duration(DefaultEncoderWriteIdle))
	}
	return nil
}

func checkEncoderMinRate(n int64) error {
	if n < 0 || n > maxEncoderMinRate {
		return fmt.Errorf("encoder_min_rate %d: must be 0 (none, the default)..1GiB bytes a second", n)
	}
	return nil
}

// lowerAll lowercases the encodings as Caddy's encode compares them.
func lowerAll(s []string) []string {
	for i, e := range s {
		s[i] = strings.ToLower(e)
	}
	return s
}
