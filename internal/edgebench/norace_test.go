//go:build !race

package edgebench

const raceEnabled = false
