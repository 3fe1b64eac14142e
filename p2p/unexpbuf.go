package p2p

import (
	"math/bits"
	"sync"
)

// Unexpected eager messages (those that arrive before their receive is
// posted) wait in buffers of their own. These come from pools and go back
// once a receive in host memory has copied the message out (recycle), so
// that a late receiver does not cost an allocation a message: a
// point-to-point collective at np 4 on 2 cores (oversubscribed: receivers
// are often late) made most of its garbage there (docs/measurements.md,
// "Message rate"). A message received into device memory keeps its buffer
// (the staging copy reads it later), as does one a matched probe holds or
// a revoke drops: the collector takes those. A recycled buffer is not
// zeroed: the transports write all n bytes of a frame before End.

// eagerBufs keeps buffers by power-of-two size class up to 1 MiB (every
// transport's eager limit is below); holders keeps the empty *[]byte
// that carry them, so that neither Get nor Put allocates once warm.
var (
	eagerBufs [21]sync.Pool
	holders   sync.Pool
	unexpPool = sync.Pool{New: func() any { return new(unexpected) }}
)

// getEager returns a buffer of n bytes, its content undefined.
func getEager(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	k := bits.Len(uint(n - 1))
	if k >= len(eagerBufs) {
		return make([]byte, n)
	}
	if p, ok := eagerBufs[k].Get().(*[]byte); ok {
		b := (*p)[:n]
		*p = nil
		holders.Put(p)
		return b
	}
	return make([]byte, n, 1<<k)
}

// putEager gives back a buffer from getEager.
func putEager(b []byte) {
	c := cap(b)
	if c == 0 {
		return
	}
	k := bits.Len(uint(c - 1))
	if k >= len(eagerBufs) || 1<<k != c {
		return
	}
	p, ok := holders.Get().(*[]byte)
	if !ok {
		p = new([]byte)
	}
	*p = b[:c]
	eagerBufs[k].Put(p)
}

// newUnexpected returns a zero unexpected from the pool.
func newUnexpected() *unexpected { return unexpPool.Get().(*unexpected) }

// recycle gives back an eager unexpected message that a receive in host
// memory has just taken (deliver copied it out; the caller looked at the
// receive's memory before deliver, since a completed request forgets it):
// nothing refers to it any more (it left the queue when the receive
// matched it, a matched probe's Message let go of it, and the transport's
// arrival state forgot it at End).
func (e *Engine) recycle(u *unexpected) {
	if u.rts || u.failed != nil {
		return
	}
	putEager(u.data)
	*u = unexpected{}
	unexpPool.Put(u)
}
