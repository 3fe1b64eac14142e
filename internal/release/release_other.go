//go:build !amd64

package release

import "sync/atomic"

// Store64 stores v into *p with release ordering (package comment).
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
