//go:build !race

package substitute

const raceEnabled = false
