package boot

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxNesting bounds how deep arrays and maps nest in a message from a
// peer. Cards, rosters and control and agent frames nest four levels at
// most (a roster's cards' address map's values).
const maxNesting = 16

// errShape is wrapped by checkShape's errors.
var errShape = errors.New("malformed msgpack")

// checkShape reports whether b is exactly one msgpack value whose every
// declared length fits in the bytes that follow it, nested at most
// maxNesting deep. Every decoder of a peer's msgpack calls it before
// msgpack.Unmarshal, which trusts declared lengths: it sizes a slice field
// by the array header before reading a single element, so that 9 bytes
// claiming 2^32 cards made it allocate 480 GB and the rank die of "out of
// memory" (FuzzRoster found it; testdata/fuzz/FuzzRoster holds the
// input). After this check every array, map, string and byte slice that
// Unmarshal makes is at most as long as the input, so what it allocates
// is bounded by a small multiple of len(b).
func checkShape(b []byte) error {
	// pending[i] is how many values level i still holds; each needs at
	// least one byte, so their sum may never exceed what is left.
	var pendingBuf [maxNesting + 1]uint64
	pending := append(pendingBuf[:0], 1)
	var owed uint64 = 1 // the sum of pending
	i := 0
	for len(pending) > 0 {
		if pending[len(pending)-1] == 0 {
			pending = pending[:len(pending)-1]
			continue
		}
		if i >= len(b) {
			return fmt.Errorf("%w: ends after %d bytes with %d values to come", errShape, len(b), owed)
		}
		pending[len(pending)-1]--
		owed--
		c := b[i]
		i++
		var n uint64 // bytes of data that follow the header
		var items uint64
		var container bool
		lenField := func(size int) (uint64, error) {
			if len(b)-i < size {
				return 0, fmt.Errorf("%w: length field cut at byte %d", errShape, i)
			}
			var v uint64
			switch size {
			case 1:
				v = uint64(b[i])
			case 2:
				v = uint64(binary.BigEndian.Uint16(b[i:]))
			case 4:
				v = uint64(binary.BigEndian.Uint32(b[i:]))
			}
			i += size
			return v, nil
		}
		var err error
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
			// fixint, nil, bool
		case c >= 0x80 && c <= 0x8f:
			items, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f:
			items, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			n = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			n, err = lenField(1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			n, err = lenField(2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			n, err = lenField(4)
		case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext8/16/32: length, type
			n, err = lenField(1 << (c - 0xc7))
			n++
		case c == 0xca, c == 0xce, c == 0xd2: // float32, uint32, int32
			n = 4
		case c == 0xcb, c == 0xcf, c == 0xd3: // float64, uint64, int64
			n = 8
		case c == 0xcc, c == 0xd0: // uint8, int8
			n = 1
		case c == 0xcd, c == 0xd1: // uint16, int16
			n = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1..16: type, data
			n = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			items, err = lenField(2)
			container = true
		case c == 0xdd: // array32
			items, err = lenField(4)
			container = true
		case c == 0xde: // map16
			items, err = lenField(2)
			items *= 2
			container = true
		case c == 0xdf: // map32
			items, err = lenField(4)
			items *= 2
			container = true
		default: // 0xc1, never used
			return fmt.Errorf("%w: byte %#x at %d", errShape, c, i-1)
		}
		if err != nil {
			return err
		}
		left := uint64(len(b) - i)
		if n > left {
			return fmt.Errorf("%w: %d bytes declared at byte %d, %d left", errShape, n, i, left)
		}
		i += int(n)
		if !container || items == 0 {
			continue
		}
		if owed+items > uint64(len(b)-i) {
			return fmt.Errorf("%w: %d elements declared at byte %d, %d bytes left", errShape, items, i, len(b)-i)
		}
		if len(pending) > maxNesting {
			return fmt.Errorf("%w: nested more than %d deep", errShape, maxNesting)
		}
		pending = append(pending, items)
		owed += items
	}
	if i != len(b) {
		return fmt.Errorf("%w: %d bytes after the value", errShape, len(b)-i)
	}
	return nil
}
