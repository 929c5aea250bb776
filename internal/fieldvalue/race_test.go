//go:build race

package fieldvalue

// The race detector allocates on its own account.
const raceEnabled = true
