package sm

import (
	"encoding/binary"
	"os"
	"unsafe"

	"github.com/gorun/gorun/btl"
)

// Layout of a receive segment (doc.go explains who writes what). Every
// atomic word is aligned to its size and lies inside one cache line: an
// atomic that straddles a line takes a bus lock, measured at ~0.5 ms here
// (docs/measurements.md). TestLayout checks this.
const (
	lineSize = 64

	// segMagic ("gorunsm1" read as a little-endian word) opens the header;
	// the owner stores it last, so a peer that sees it sees the rest.
	segMagic      uint64 = 0x316d736e75726f67
	layoutVersion        = 4

	// Control area, line 0: written once by the owner at Open (closed at
	// Close), read by peers.
	offMagic    = 0  // u64
	offVersion  = 8  // u32
	offSize     = 12 // u32: world size, the registry's capacity
	offSlots    = 16 // u32: slots per ring
	offFrag     = 20 // u32: payload bytes per slot
	offRingBase = 24 // u64: file offset of ring 0
	offRingSize = 32 // u64: bytes per ring, page multiple
	offPID      = 40 // u32: owner's pid
	offClosed   = 44 // u32: 1 once the owner has closed its module
	offAddr     = 48 // u64: address of this header in the owner's memory (single-copy probe)
	offBellOn   = 56 // u32: 1 once the owner polls by doorbell (set once, never cleared)

	// Waiting, each word on a line of its own, two lines apart so the
	// adjacent-line prefetcher does not pair them.
	offWaiters = 2 * lineSize // u32: how many of the owner's threads sleep on offSeq
	offSeq     = 4 * lineSize // u32: futex word, bumped by whoever wakes the owner

	// Attachment, written by peers.
	offNReg   = 6 * lineSize // u32: registry entries claimed
	offOpened = offNReg + 4  // u32: peers that have opened this segment
	offList   = 8 * lineSize // [size]u32: registry, rank+1 of each sender
	// The doorbell follows the registry, from the next line on (offBell):
	// [(size+63)/64]u64, bit s%64 of word s/64 set by sender s after it
	// published, cleared by the owner's swap (doc.go, "Doorbell").

	// Ring control page, at the start of each ring.
	offHead       = 0            // u64: consumer: slots consumed (next ticket to read)
	offProdPID    = 2 * lineSize // u32: producer's pid
	offFull       = offProdPID + 4
	offProdClosed = offProdPID + 8 // u32: 1 once the producer has closed its module
	ringCtlSize   = 4096

	// Record: the unit a ring carries, starting on a half line (doc.go,
	// "Records"). Its seq word, then its meta word: the kind in the top
	// byte; a frame's first record also has the header length and the
	// frame's length, a continuation its payload length. A first record
	// carries the header's significant leading bytes (trailing zero bytes
	// are left out: p2p's eager header has 13-14 of 48) and the payload
	// right behind, so a payload of up to 34 bytes makes a one-line record.
	offRecSeq  = 0  // u64: the record's position in the ring's byte stream + 1, stored last by the producer
	offRecMeta = 8  // u64: kind << metaKindShift | ...
	offRecBody = 16 // first record: header, then payload; continuation: payload

	// A short record is a whole frame of up to shortBody bytes of header
	// and payload in half a line: one word (shortWord) that says so and
	// is stored last, as a seq word is, then the header's significant
	// bytes and the payload. p2p's eager header of a message of up to 11
	// bytes fits, so that two such messages share a line.
	halfLine  = lineSize / 2
	shortBody = halfLine - 8
	recShort  = 4
	// recPad: a half line left empty after a short record, so that the
	// full record that follows starts on a line (a full record of one
	// line would otherwise span two); its word is a short word's without
	// lengths, and the consumer passes over it.
	recPad = 5
	// shortSeqBits: the short word's low bits hold the record's position
	// in half lines + 1, cut to this many bits (a check, as seq is: the
	// word the consumer reads next is 0 until its record comes).
	shortSeqBits = 40
	// Records are at most a stride long, and a stride is a multiple of
	// 128 bytes: a ring is a whole number of line pairs.
	slotAlign     = 2 * lineSize
	metaKindShift = 56
	metaHdrShift  = 48
	metaLenMask   = 1<<metaHdrShift - 1

	recFirst = 1 // a frame's first record: hl << metaHdrShift | frame length
	recCont  = 2 // a later record of the frame: its payload length
	recSkip  = 3 // nothing: the rest of the ring up to its end is unused this lap
)

// shortWord is the word that publishes a short record at stream
// position pos: recShort in the top byte, then hl (the header's bytes),
// then n (the payload's), then the position's half lines + 1 in the low
// shortSeqBits. Its top byte is never 0, so it is never 0 itself and never
// a full record's seq word (a position + 1 below 2^56).
func shortWord(pos uint64, hl, n int) uint64 {
	return recShort<<metaKindShift | uint64(hl)<<metaHdrShift | uint64(n)<<shortSeqBits | shortSeq(pos)
}

// shortSeq is the low part of a short word at stream position pos.
func shortSeq(pos uint64) uint64 { return (pos/halfLine + 1) & (1<<shortSeqBits - 1) }

// firstMeta is the meta word of a frame's first record: hl bytes of
// header, a frame of total payload bytes.
func firstMeta(hl, total int) uint64 {
	return recFirst<<metaKindShift | uint64(hl)<<metaHdrShift | uint64(total)
}

var pageSize = os.Getpagesize()

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// slotStride is the size of the largest record when fragments carry at
// least frag payload bytes; a ring's data area is slots such strides.
func slotStride(frag int) int { return roundUp(lineSize+frag, slotAlign) }

// fragCap is the payload a record of stride bytes carries with a full
// header: the Caps.MaxFrag of the ring.
func fragCap(stride int) int { return stride - lineSize }

// recLen is the length of a record with body bytes after its seq and meta
// words: whole lines.
func recLen(body int) int { return roundUp(offRecBody+body, lineSize) }

// offBell is the offset of the doorbell bitmap for a world of size ranks:
// the line after the registry. The words are packed: np <= 64 has one.
func offBell(size int) int { return roundUp(offList+4*size, lineSize) }

// bellWords is the number of doorbell words for a world of size ranks.
func bellWords(size int) int { return (size + 63) / 64 }

// ctlBytes is the size of the control area for a world of size ranks.
func ctlBytes(size int) int { return roundUp(offBell(size)+8*bellWords(size), pageSize) }

// ringBytes is the size of one ring.
func ringBytes(slots, frag int) int { return roundUp(ringCtlSize+slots*slotStride(frag), pageSize) }

// significant is the length of h without its trailing zero bytes.
func significant(h *btl.Header) int {
	n := len(h)
	for n >= 8 && binary.LittleEndian.Uint64(h[n-8:n]) == 0 {
		n -= 8
	}
	for n > 0 && h[n-1] == 0 {
		n--
	}
	return n
}

// u32 and u64 point at a word of shared memory (bounds-checked: the whole
// word lies inside b).
func u32(b []byte, off int) *uint32 {
	_ = b[off+3]
	return (*uint32)(unsafe.Pointer(&b[off]))
}

func u64(b []byte, off int) *uint64 {
	_ = b[off+7]
	return (*uint64)(unsafe.Pointer(&b[off]))
}
