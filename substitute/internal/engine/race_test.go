//go:build race

package engine

// raceEnabled scales property tests down under the race detector, which
// makes them about ten times slower, and skips allocation counts (the race
// detector makes sync.Pool drop items on purpose).
const raceEnabled = true
