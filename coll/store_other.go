//go:build !amd64 || race

package coll

import "sync/atomic"

// storeRelease stores v into *p after every store before it: sync/atomic's
// store where plain stores may become visible out of order, and under the
// race detector, which sees its order but not a plain store's.
func storeRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
