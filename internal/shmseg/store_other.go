//go:build !amd64

package shmseg

import "sync/atomic"

// StoreRelease: see store_amd64.go (a plain store there).
func StoreRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
