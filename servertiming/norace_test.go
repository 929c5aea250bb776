//go:build !race

package servertiming

const raceEnabled = false
