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
	"time"
)

// handshakeTimeout bounds every step of the handshake so that a stray
// connection that says nothing cannot hold a slot.
const handshakeTimeout = 5 * time.Second

var magic = [8]byte{'G', 'O', 'R', 'U', 'N', 'T', 'C', '1'}

// errAuth is returned when a peer fails to prove knowledge of the secret.
var errAuth = errors.New("authentication failed")

// Handshake (both sides hold key = HMAC(secret, "gorun tcp")):
//
//	acceptor -> dialer: nonceA (32)
//	dialer -> acceptor: magic (8) | rank (4) | dest rank (4) | nonceD (32) | HMAC(key, "dial"|nonceA|rank|dest|nonceD)
//	acceptor -> dialer: HMAC(key, "acpt"|nonceD|nonceA|rank|dest)
//
// The acceptor learns the dialer's rank only from an authenticated message;
// the dialer learns that it reached a process of the same job.
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

// dialHandshake runs the dialer's side on c, announcing rank and the rank it
// expects to reach.
func dialHandshake(c net.Conn, key []byte, rank, dest int) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	nonceA := make([]byte, 32)
	if _, err := io.ReadFull(c, nonceA); err != nil {
		return fmt.Errorf("read challenge: %w", err)
	}
	nonceD := make([]byte, 32)
	rand.Read(nonceD)
	msg := make([]byte, 0, 8+4+4+32+32)
	msg = append(msg, magic[:]...)
	msg = append(msg, u32(rank)...)
	msg = append(msg, u32(dest)...)
	msg = append(msg, nonceD...)
	msg = append(msg, mac(key, []byte("dial"), nonceA, u32(rank), u32(dest), nonceD)...)
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	reply := make([]byte, 32)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("read reply: %w (the peer rejected us?)", err)
	}
	if !hmac.Equal(reply, mac(key, []byte("acpt"), nonceD, nonceA, u32(rank), u32(dest))) {
		return fmt.Errorf("peer's reply: %w", errAuth)
	}
	return nil
}

// acceptHandshake runs the acceptor's side and returns the dialer's rank.
func acceptHandshake(c net.Conn, key []byte, self, size int) (int, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	nonceA := make([]byte, 32)
	rand.Read(nonceA)
	if _, err := c.Write(nonceA); err != nil {
		return -1, fmt.Errorf("send challenge: %w", err)
	}
	msg := make([]byte, 8+4+4+32+32)
	if _, err := io.ReadFull(c, msg); err != nil {
		return -1, fmt.Errorf("read proof: %w", err)
	}
	if [8]byte(msg[:8]) != magic {
		return -1, fmt.Errorf("bad magic %q: %w", msg[:8], errAuth)
	}
	rb, db := msg[8:12], msg[12:16]
	nonceD, proof := msg[16:48], msg[48:80]
	if !hmac.Equal(proof, mac(key, []byte("dial"), nonceA, rb, db, nonceD)) {
		return -1, errAuth
	}
	rank := int(binary.LittleEndian.Uint32(rb))
	dest := int(binary.LittleEndian.Uint32(db))
	if rank < 0 || rank >= size || dest != self {
		return -1, fmt.Errorf("authenticated peer claims rank %d to reach rank %d (we are %d of %d)", rank, dest, self, size)
	}
	if _, err := c.Write(mac(key, []byte("acpt"), nonceD, nonceA, rb, db)); err != nil {
		return -1, fmt.Errorf("send reply: %w", err)
	}
	return rank, nil
}
