package btltest

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/gorun/gorun/btl"
)

// patternPeriod is prime and just above 64 KiB, so a fragment delivered in
// the wrong place (one slot, one 64 KiB read, off) never matches.
const patternPeriod = 65537

// maxFrame is the largest frame the suite sends.
const maxFrame = 64 << 20

var (
	patOnce sync.Once
	pat     []byte // read-only source of every payload
)

// pattern returns the payload of frame index idx from rank src: a slice of
// a shared read-only buffer (transports only read payloads).
func pattern(src, idx, n int) []byte {
	patOnce.Do(func() {
		pat = make([]byte, maxFrame+patternPeriod)
		x := uint32(2463534242)
		for i := 0; i < patternPeriod; i++ {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			pat[i] = byte(x)
		}
		for i := patternPeriod; i < len(pat); i += patternPeriod {
			copy(pat[i:], pat[:patternPeriod])
		}
	})
	start := (src*7919 + idx*104729) % patternPeriod
	return pat[start : start+n : start+n]
}

// Header layout of the suite's frames.
const hdrMagic = 0x7473_6574_6c74_62 // "btltest"

func makeHeader(h *btl.Header, src, idx, n int) {
	le := binary.LittleEndian
	le.PutUint64(h[0:], hdrMagic)
	le.PutUint64(h[8:], uint64(idx))
	le.PutUint64(h[16:], uint64(n))
	le.PutUint64(h[24:], uint64(src))
	// Odd frames fill the whole header; even ones end in 16 zero bytes,
	// as p2p's eager header does (transports may elide them).
	for i := 32; i < btl.HeaderSize; i++ {
		h[i] = byte(idx*31+i) * byte(idx&1)
	}
}

// parseHeader returns what makeHeader put in h, and whether h is intact.
func parseHeader(h *btl.Header) (src, idx, n int, ok bool) {
	le := binary.LittleEndian
	src, idx, n = int(le.Uint64(h[24:])), int(le.Uint64(h[8:])), int(le.Uint64(h[16:]))
	var want btl.Header
	makeHeader(&want, src, idx, n)
	return src, idx, n, want == *h
}

func samePayload(src, idx int, got []byte) bool {
	return bytes.Equal(got, pattern(src, idx, len(got)))
}
