// Package bufpool keeps byte buffers by power-of-two size class, for the
// scratch and arrival buffers that collectives and the point-to-point
// engine would otherwise allocate on every call or message. Get and Put
// allocate nothing once a class is warm: the *[]byte that carries a
// buffer through a sync.Pool is itself recycled (a fresh &b on every Put
// was 24 bytes of garbage each time).
package bufpool

import (
	"math/bits"
	"sync"
)

// Pool keeps buffers of capacity 2^k for k below its number of classes.
// The zero Pool keeps nothing; New makes one.
type Pool struct {
	classes []sync.Pool
	holders sync.Pool
}

// New returns a pool of buffers up to 2^(classes-1) bytes.
func New(classes int) *Pool { return &Pool{classes: make([]sync.Pool, classes)} }

// Class is the size class of n bytes (n >= 1): the smallest k with
// 2^k >= n.
func Class(n int) int { return bits.Len(uint(n - 1)) }

// Get returns a buffer of n bytes, its content undefined; a length beyond
// the largest class is allocated plainly (Put then drops it). Get(0) is
// an empty, non-nil slice.
func (p *Pool) Get(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	h := p.GetRef(n)
	b := *h
	*h = nil
	p.holders.Put(h)
	return b
}

// Put gives back a buffer from Get once nothing reads or writes it; a
// buffer whose capacity is not a class's is dropped.
func (p *Pool) Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	h, ok := p.holders.Get().(*[]byte)
	if !ok {
		h = new([]byte)
	}
	*h = b
	p.PutRef(h)
}

// GetRef returns a buffer of n bytes (n >= 1) as *h, the pointer the pool
// keeps it under, for callers that hold the buffer by pointer (they give
// it back with PutRef, and neither allocates once warm). A length beyond
// the largest class is allocated plainly.
func (p *Pool) GetRef(n int) *[]byte {
	k := Class(n)
	if k >= len(p.classes) {
		b := make([]byte, n)
		return &b
	}
	if h, ok := p.classes[k].Get().(*[]byte); ok {
		*h = (*h)[:n]
		return h
	}
	b := make([]byte, n, 1<<k)
	return &b
}

// PutRef gives back a buffer from GetRef (nil is ignored); one whose
// capacity is not a class's is dropped.
func (p *Pool) PutRef(h *[]byte) {
	if h == nil {
		return
	}
	c := cap(*h)
	if c == 0 {
		return
	}
	k := Class(c)
	if k >= len(p.classes) || 1<<k != c {
		return
	}
	*h = (*h)[:c]
	p.classes[k].Put(h)
}
