// Package tcp is the transport that reaches any peer over TCP.
//
// Each rank listens on one port (published in its business card as
// "ip:port") and dials a peer lazily, on the first frame it sends there,
// unless the peer has dialed it first.
//
// One connection a pair. Both ranks of a pair write and read the one
// connection, as Open MPI's TCP transport does: a receiver's
// acknowledgements then ride on its replies. With a connection each way
// (as here before) every message of a ping-pong made the receiver send a
// segment of acknowledgement of its own on the connection it only read,
// and handle one at the sender: an np=2 osu_latency over loopback sent
// 1.5 segments a message (Open MPI 1.0), and a two-process ping-pong of 8
// bytes over loopback on the 2-core VM took 8.8 us one way against 5.3
// with one connection. When two ranks dial each other at once, the lower
// rank's dial wins: its acceptor refuses the higher rank's dial in the
// handshake's reply (handshake.go) before any frame goes on it, and the
// higher rank waits for the lower rank's connection (stAwait), or, where
// that connection arrives first, drops its own dial under way (attach).
// Each direction is therefore a single ordered stream from its first
// frame on. A rank that has taken a peer's dial never dials that peer
// (claims, under the module's lock, since acceptors run in goroutines).
// A dialer that hangs up before its proof (a dial that lost the race) is
// not logged as a rejected connection. A claim is never undone: a lower
// rank whose own dial cannot get through (a firewall that drops it)
// refuses the higher rank's dial all the same, and the higher rank waits
// out GORUN_TCP_CONNECT_TIMEOUT. Where only one rank of a pair can reach
// the other, the pair works when that rank sends first, or alone; with a
// connection each way it never did.
//
// Before any frame is accepted both sides prove knowledge of the job secret
// (handshake.go); a connection that fails is closed and logged, and nothing
// from it is delivered.
//
// Connecting. Nothing waits on the network under the engine lock
// (btl/doc.go). The first Send to a peer opens a non-blocking socket,
// starts connect(2), queues the frame and returns; so do later Sends until
// the connection is ready. Progress, through the busy list where the
// connection waits with its queue, moves it along (connect.go):
//
//	stIdle        no socket yet
//	stConnecting  connect in flight: ready on POLLOUT, then SO_ERROR says how it ended
//	stChallenge   reading the acceptor's 32-byte nonce
//	stProof       writing the dialer's 80-byte message (rank, destination, nonce, HMAC)
//	stReply       reading the acceptor's 32-byte HMAC, checked against the secret
//	              (and telling whether the acceptor took the connection)
//	stAwait       refused, or the peer's dial taken already: no socket, the
//	              queue waits for the peer's connection
//	stReady       frames flow: the queue is flushed, and Send writes at once
//	stFailed      Send refuses with the error
//
// Reads and writes of the handshake are partial when the socket says so;
// what is done is kept and the rest waits for the next Progress. Wait
// watches connecting sockets as it does the others: POLLOUT while
// connecting or writing, POLLIN while the acceptor's message is due. A
// connect refused, a handshake the peer breaks off or fails, or a set-up
// not finished within GORUN_TCP_CONNECT_TIMEOUT (default 10 s, params.go)
// of the first Send fails every queued frame (FrameDone with the error; a
// timeout wraps os.ErrDeadlineExceeded) and reports Handler.PeerFailed for
// that peer. PeerFailed is reported once per peer, whichever of its
// connections failed first. A peer that never answers therefore costs
// nothing but its own frames: other peers' traffic goes on meanwhile.
//
// Accepting. The accept loop is a goroutine, and each accepted connection
// runs the acceptor's side of the handshake in a goroutine of its own,
// under the same deadline, so that a stranger that connects and says
// nothing neither delays other peers nor holds a goroutine for longer.
// Authenticated connections wait in a list that Progress adopts.
//
// After the handshake the module owns the raw, non-blocking file
// descriptors: Progress reads and writes them from the calling goroutine (no
// goroutine per connection: docs/measurements.md measured 0.3-0.7 µs per message for a
// hand-off between goroutines), and Wait blocks in ppoll when the engine has
// nothing better to do.
//
// Wire format of a frame: 8 bytes payload length (little endian), the
// 48-byte opaque header, the payload.
package tcp
