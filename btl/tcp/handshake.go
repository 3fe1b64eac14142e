package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

var magic = [8]byte{'G', 'O', 'R', 'U', 'N', 'T', 'C', '1'}

// errAuth is returned when a peer fails to prove knowledge of the secret.
var errAuth = errors.New("authentication failed")

// errHungUp: the dialer closed the connection before it sent its proof,
// as a peer's dial does when it lost to this rank's own (attach).
var errHungUp = errors.New("closed before the proof")

// Sizes of the handshake's messages.
const (
	nonceSize   = 32
	macSize     = sha256.Size
	dialMsgSize = len(magic) + 4 + 4 + nonceSize + macSize
)

// Handshake (both sides hold key = HMAC(secret, "gorun tcp")):
//
//	acceptor -> dialer: nonceA (32)
//	dialer -> acceptor: magic (8) | rank (4) | dest rank (4) | nonceD (32) | HMAC(key, "dial"|nonceA|rank|dest|nonceD)
//	acceptor -> dialer: HMAC(key, "acpt"|nonceD|nonceA|rank|dest), or with "acpn" for "no"
//
// The acceptor learns the dialer's rank only from an authenticated message;
// the dialer learns that it reached a process of the same job, and whether
// the acceptor takes the connection as the pair's ("acpt") or has dialed
// the dialer itself ("acpn": the dialer closes this one and waits for that
// one; doc.go, "One connection a pair"). The
// acceptor's side runs in a goroutine per accepted connection
// (acceptHandshake, blocking, under a deadline); the dialer's side runs in
// Progress as a non-blocking state machine (connect.go) built from dialMsg
// and acceptMAC.
func deriveKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("gorun tcp"))
	return m.Sum(nil)
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func u32(v int) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, uint32(v))
	return b
}

// dialMsg returns the dialer's message answering the challenge nonceA:
// rank announces itself, dest is the rank it expects to reach, nonceD its
// own challenge.
func dialMsg(key, nonceA, nonceD []byte, rank, dest int) []byte {
	msg := make([]byte, 0, dialMsgSize)
	msg = append(msg, magic[:]...)
	msg = append(msg, u32(rank)...)
	msg = append(msg, u32(dest)...)
	msg = append(msg, nonceD...)
	return append(msg, mac(key, []byte("dial"), nonceA, u32(rank), u32(dest), nonceD)...)
}

// acceptMAC is the acceptor's reply to a dialer's message whose rank and
// dest fields are rb and db: yes, it takes the connection, or no.
func acceptMAC(key, nonceD, nonceA, rb, db []byte, yes bool) []byte {
	word := "acpn"
	if yes {
		word = "acpt"
	}
	return mac(key, []byte(word), nonceD, nonceA, rb, db)
}

// acceptHandshake runs the acceptor's side and returns the dialer's rank
// and the verdict it gave: verdict (nil: always yes) decides, once the
// dialer has proved itself, whether this side takes the connection. The
// whole exchange must end within timeout, so that a stranger that
// connects and says nothing holds the goroutine no longer.
func acceptHandshake(c net.Conn, key []byte, self, size int, timeout time.Duration, verdict func(rank int) bool) (int, bool, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	nonceA := make([]byte, nonceSize)
	rand.Read(nonceA)
	if _, err := c.Write(nonceA); err != nil {
		return -1, false, fmt.Errorf("send challenge: %w", err)
	}
	msg := make([]byte, dialMsgSize)
	if n, err := io.ReadFull(c, msg); err != nil {
		if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			err = fmt.Errorf("%w (%v)", errHungUp, err)
		}
		return -1, false, fmt.Errorf("read proof: %w", err)
	}
	if [8]byte(msg[:8]) != magic {
		return -1, false, fmt.Errorf("bad magic %q: %w", msg[:8], errAuth)
	}
	rb, db := msg[8:12], msg[12:16]
	nonceD, proof := msg[16:48], msg[48:80]
	if !hmac.Equal(proof, mac(key, []byte("dial"), nonceA, rb, db, nonceD)) {
		return -1, false, errAuth
	}
	rank := int(binary.LittleEndian.Uint32(rb))
	dest := int(binary.LittleEndian.Uint32(db))
	if rank < 0 || rank >= size || dest != self {
		return -1, false, fmt.Errorf("authenticated peer claims rank %d to reach rank %d (we are %d of %d)", rank, dest, self, size)
	}
	yes := verdict == nil || verdict(rank)
	if _, err := c.Write(acceptMAC(key, nonceD, nonceA, rb, db, yes)); err != nil && yes {
		// (A refusal the dialer did not wait for is no failure: its
		// dial lost to this rank's, which it has taken.)
		return -1, false, fmt.Errorf("send reply: %w", err)
	}
	return rank, yes, nil
}
