//go:build race

package servertiming

// raceEnabled: the race detector makes sync.Pool drop what is put back, so
// allocation bounds hold only without it.
const raceEnabled = true
