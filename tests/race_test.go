//go:build race

package tests

// sync.Pool drops a share of its Puts on purpose under the race detector.
const raceEnabled = true
