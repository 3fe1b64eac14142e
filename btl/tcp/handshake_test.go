package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"
)

// dialHandshake runs the dialer's side of the handshake on c, blocking:
// the exchange that Progress runs without blocking (connect.go), for tests
// that play a peer.
func dialHandshake(c net.Conn, key []byte, rank, dest int) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	nonceA := make([]byte, nonceSize)
	if _, err := io.ReadFull(c, nonceA); err != nil {
		return fmt.Errorf("read challenge: %w", err)
	}
	nonceD := make([]byte, nonceSize)
	rand.Read(nonceD)
	if _, err := c.Write(dialMsg(key, nonceA, nonceD, rank, dest)); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	reply := make([]byte, macSize)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if !hmac.Equal(reply, acceptMAC(key, nonceD, nonceA, u32(rank), u32(dest), true)) {
		return fmt.Errorf("peer's reply: %w", errAuth)
	}
	return nil
}
