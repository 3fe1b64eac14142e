//go:build !amd64 || race

package relstore

import "sync/atomic"

// Store64 stores v into *p with (at least) release order.
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
