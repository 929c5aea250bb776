//go:build race

package caddybrotli

// raceEnabled: under the race detector the single-goroutine cross-decode
// matrix runs on its small file only (it checks codecs, not concurrency, and
// CI runs it in full without -race); TestEncodersPooledConcurrently is the
// one that needs the detector.
const raceEnabled = true
