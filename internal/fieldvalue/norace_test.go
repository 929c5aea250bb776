//go:build !race

package fieldvalue

const raceEnabled = false
