// Package tcp is the transport that reaches any peer over TCP.
//
// Each rank listens on one port (published in its business card) and dials
// a peer lazily, on the first frame it sends there. Connections are
// one-way: a rank sends only on the connections it dialed and receives only
// on those it accepted, so no tie-break is needed when two ranks dial each
// other at once and each direction stays a single ordered stream.
//
// Before any frame is accepted both sides prove knowledge of the job secret
// (handshake.go); a connection that fails is closed and logged, and nothing
// from it is delivered.
//
// After the handshake the module owns the raw, non-blocking file
// descriptors: Progress reads and writes them from the calling goroutine (no
// goroutine per connection: BENCH.md measured 0.3-0.7 µs per message for a
// hand-off between goroutines), and Wait blocks in ppoll when the engine has
// nothing better to do. The only goroutine is the accept loop.
//
// Wire format of a frame: 8 bytes payload length (little endian), the
// 48-byte opaque header, the payload.
package tcp
