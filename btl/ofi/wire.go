package ofi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gorun/gorun/btl"
)

// The module's messages (doc.go, "Messages"). Every message starts
// with a fixed part:
//
//	0      type
//	1-3    zero
//	4-7    source rank (little endian)
//	8-15   job cookie (the first 8 bytes of HMAC-SHA256(secret, "gorun-ofi " + job id))
//	16-19  sequence number of the message from this source (wraps)
//	20-23  zero
//
// then, by type:
//
//	tFirst  24-31 frame payload length, 32-79 the frame's btl.Header, then the first payload bytes
//	tCont   the next payload bytes of the frame in progress
//	tProbe  nothing: a liveness probe whose send completion (or error) is all that counts
//	tHello  the sender's business card: the first message to each peer, so that a
//	        rank that only receives from a peer can still probe it
const (
	tFirst = 1 + iota
	tCont
	tProbe
	tHello
	numTypes
)

// Header sizes.
const (
	fixedLen = 24
	firstLen = fixedLen + 8 + btl.HeaderSize // 80
)

// msg is a decoded message header.
type msg struct {
	typ    uint8
	src    int
	cookie uint64
	seq    uint32
	// tFirst only:
	total uint64
	hdr   *btl.Header // points into the message
	data  []byte      // payload bytes the message carries
}

// ErrMalformed is the error of a message that is not one (decodeMsg).
var ErrMalformed = errors.New("ofi: malformed message")

// decodeMsg reads a received message b, from a peer that may be corrupt or
// malicious, into m. It checks the type, the reserved bytes, the lengths,
// and the source rank against size; the cookie and the sequence are the
// caller's to check. m.hdr and m.data alias b.
func decodeMsg(b []byte, size int, m *msg) error {
	if len(b) < fixedLen {
		return fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	m.typ = b[0]
	if m.typ == 0 || m.typ >= numTypes {
		return fmt.Errorf("%w: type %d", ErrMalformed, b[0])
	}
	if b[1]|b[2]|b[3]|b[20]|b[21]|b[22]|b[23] != 0 {
		return fmt.Errorf("%w: reserved bytes set", ErrMalformed)
	}
	src := binary.LittleEndian.Uint32(b[4:])
	if size <= 0 || int64(src) >= int64(size) {
		return fmt.Errorf("%w: source rank %d in a job of %d", ErrMalformed, src, size)
	}
	m.src = int(src)
	m.cookie = binary.LittleEndian.Uint64(b[8:])
	m.seq = binary.LittleEndian.Uint32(b[16:])
	m.total, m.hdr = 0, nil
	switch m.typ {
	case tFirst:
		if len(b) < firstLen {
			return fmt.Errorf("%w: first fragment of %d bytes", ErrMalformed, len(b))
		}
		m.total = binary.LittleEndian.Uint64(b[24:])
		m.hdr = (*btl.Header)(b[32:firstLen])
		m.data = b[firstLen:]
		if uint64(len(m.data)) > m.total {
			return fmt.Errorf("%w: %d payload bytes in a frame of %d", ErrMalformed, len(m.data), m.total)
		}
	case tCont:
		m.data = b[fixedLen:]
		if len(m.data) == 0 {
			return fmt.Errorf("%w: empty continuation", ErrMalformed)
		}
	case tProbe:
		m.data = nil
		if len(b) != fixedLen {
			return fmt.Errorf("%w: probe of %d bytes", ErrMalformed, len(b))
		}
	case tHello:
		m.data = b[fixedLen:]
		if len(m.data) == 0 {
			return fmt.Errorf("%w: empty hello", ErrMalformed)
		}
	}
	return nil
}

// putFixed writes the fixed part of a message into b.
func putFixed(b []byte, typ uint8, src int, cookie uint64, seq uint32) {
	clear(b[:fixedLen])
	b[0] = typ
	binary.LittleEndian.PutUint32(b[4:], uint32(src))
	binary.LittleEndian.PutUint64(b[8:], cookie)
	binary.LittleEndian.PutUint32(b[16:], seq)
}

// putFirst writes the header of a frame's first fragment into b.
func putFirst(b []byte, src int, cookie uint64, seq uint32, total int, h *btl.Header) {
	putFixed(b, tFirst, src, cookie, seq)
	binary.LittleEndian.PutUint64(b[24:], uint64(total))
	copy(b[32:firstLen], h[:])
}

// jobCookie derives the job's cookie from its secret: a peer that does not
// know the secret cannot make a message this module accepts.
func jobCookie(secret []byte, job string) uint64 {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gorun-ofi " + job))
	return binary.LittleEndian.Uint64(h.Sum(nil))
}

// The business card (Module.Address):
//
//	0      version (1)
//	1      length of the provider name, then the name ("tcp;ofi_rxm")
//	.      length of the fabric name, then the name
//	.      2 bytes: length of the endpoint address (little endian), then the address (fi_getname)
const cardVersion = 1

// card is a decoded business card.
type card struct {
	prov, fabric string
	addr         []byte
}

func (c card) encode() []byte {
	b := []byte{cardVersion, byte(len(c.prov))}
	b = append(b, c.prov...)
	b = append(b, byte(len(c.fabric)))
	b = append(b, c.fabric...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(c.addr)))
	return append(b, c.addr...)
}

// ErrBadCard is the error of a peer's address that does not decode.
var ErrBadCard = errors.New("ofi: malformed address")

// decodeCard reads a peer's business card.
func decodeCard(b []byte) (card, error) {
	var c card
	if len(b) < 1 || b[0] != cardVersion {
		return c, fmt.Errorf("%w: version", ErrBadCard)
	}
	b = b[1:]
	str := func() (string, bool) {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return "", false
		}
		s := string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
		return s, true
	}
	var ok bool
	if c.prov, ok = str(); !ok {
		return c, fmt.Errorf("%w: provider", ErrBadCard)
	}
	if c.fabric, ok = str(); !ok {
		return c, fmt.Errorf("%w: fabric", ErrBadCard)
	}
	if len(b) < 2 {
		return c, fmt.Errorf("%w: address length", ErrBadCard)
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) != 2+n || n == 0 {
		return c, fmt.Errorf("%w: address of %d bytes in %d", ErrBadCard, n, len(b)-2)
	}
	c.addr = append([]byte(nil), b[2:]...)
	return c, nil
}
