package tcp

import (
	"time"

	"github.com/gorun/gorun/internal/params"
)

var pConnectTimeout = params.Duration("GORUN_TCP_CONNECT_TIMEOUT", defaultConnectTimeout,
	"how long a TCP connection to a peer may take to connect and authenticate, on either side; then its queued frames fail and the peer is reported failed")

// defaultConnectTimeout bounds a connection's set-up: the TCP connect and
// the handshake, measured from the first Send on the dialer's side and
// from the accept on the acceptor's. 10 s is the bound the blocking dial
// had: a connect to a live host takes well under a millisecond on a LAN,
// one SYN lost costs Linux's initial retransmission timeout of 1 s (RFC
// 6298), and two lost SYNs 3 s, so 10 s fails only a peer that is gone or
// not ours, while the membership's failure detector (a killed node
// declared dead in about 0.5 s, launcher/boot/member.go) usually reports a
// dead rank before that.
const defaultConnectTimeout = 10 * time.Second

// connectTimeout returns the tunable, or the default for a value that is
// not positive.
func connectTimeout() time.Duration {
	if d := pConnectTimeout(); d > 0 {
		return d
	}
	return defaultConnectTimeout
}
