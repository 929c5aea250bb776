//go:build !race

package caddybrotli

const raceEnabled = false
