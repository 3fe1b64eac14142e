package p2p

import (
	"sync"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/bufpool"
)

// Unexpected eager messages (those that arrive before their receive is
// posted) wait in buffers of their own. These come from pools and go back
// once a receive in host memory has copied the message out
// (deliverUnexpected), so
// that a late receiver does not cost an allocation a message: a
// point-to-point collective at np 4 on 2 cores (oversubscribed: receivers
// are often late) made most of its garbage there (docs/measurements.md,
// "Message rate"). A message received into device memory keeps its buffer
// (the staging copy reads it later), as does one a matched probe holds or
// a revoke drops: the collector takes those. A recycled buffer is not
// zeroed: the transports write all n bytes of a frame before End.

// eagerBufs keeps the buffers up to 1 MiB (every transport's eager limit
// is below).
var (
	eagerBufs = bufpool.New(21)
	unexpPool = sync.Pool{New: func() any { return new(unexpected) }}
)

// newUnexpected returns a zero unexpected from the pool.
func newUnexpected() *unexpected { return unexpPool.Get().(*unexpected) }

// deliverUnexpected hands r the eager message u, arrived whole and not
// failed (deliver), and, when r's memory is the host's, gives u back to
// the pools: deliver copied it out, and nothing refers to it any more (it
// left the queue when r matched it, a matched probe's Message let go of
// it, and the transport's arrival state forgot it at End). r's memory
// kind is read first: a completed request forgets its memory.
func (e *Engine) deliverUnexpected(r *Request, u *unexpected) {
	host := r.mem.Kind == btl.MemHost
	e.deliver(r, u.data)
	if !host {
		return
	}
	eagerBufs.Put(u.data)
	*u = unexpected{}
	unexpPool.Put(u)
}
