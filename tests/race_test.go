//go:build race

package tests

// Under the race detector allocation counts mean little: its
// instrumentation allocates, and every sync.Pool drops a share of its
// Puts on purpose (TestWaitallFree counted 29 bytes a message there).
const raceEnabled = true
