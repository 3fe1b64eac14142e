package shmseg

// StoreRelease stores v at p, which another process reads: a release
// store, so that every store this process made before it (the data a
// flag announces) is visible to a reader that sees v, but no more. On
// amd64 it is a plain MOV (stores are seen in program order there, and
// being a call it keeps the compiler from moving stores across it), where
// sync/atomic's StoreUint64 is an XCHG: that one waits until the line is
// back from the rank polling it before the next instruction runs, a whole
// cache-line round trip per flag; a plain store lets the rank go on to read
// its peers' flags meanwhile. Elsewhere it is atomic.StoreUint64.
//
// Use it where a rank publishes a flag that others poll and nothing in
// this rank depends on the store being seen before its own later loads
// (no store-then-load handshake, as Dekker's); readers use
// atomic.LoadUint64.
//
//go:noescape
func StoreRelease(p *uint64, v uint64)
