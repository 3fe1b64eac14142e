package ofi

import "container/list"

// regCache is the registration cache: registrations by (address, length),
// counted references, and the unused ones kept in least-recently-used
// order up to a limit of bytes, past which the oldest are released. It
// knows nothing of libfabric (the module's release function closes the
// registration), so that it is tested without a fabric.
//
// Why the cache may key on addresses: a cached entry keeps its memory
// pinned (runtime.Pinner), so the garbage collector can neither free nor
// move it, and no other buffer can appear at the same address while the
// entry lives. The classic hazard of registration caches (memory freed
// and mapped again under a stale registration) therefore cannot happen;
// the price is that cached memory stays allocated until evicted.
type regCache[V any] struct {
	limit   int // bytes of unused entries kept
	idle    int // bytes of unused entries now
	entries map[regKey]*regEntry[V]
	lru     list.List // unused entries, oldest first
	release func(*regEntry[V])
}

type regKey struct {
	addr uintptr
	n    int
}

type regEntry[V any] struct {
	key  regKey
	refs int
	elem *list.Element // in lru while refs == 0
	val  V
}

func newRegCache[V any](limit int, release func(*regEntry[V])) *regCache[V] {
	return &regCache[V]{limit: max(limit, 0), entries: map[regKey]*regEntry[V]{}, release: release}
}

// get returns the entry for [addr, addr+n) with a new reference, or nil
// when there is none (the caller registers and calls put).
func (c *regCache[V]) get(addr uintptr, n int) *regEntry[V] {
	e := c.entries[regKey{addr, n}]
	if e == nil {
		return nil
	}
	if e.refs == 0 {
		c.lru.Remove(e.elem)
		e.elem = nil
		c.idle -= e.key.n
	}
	e.refs++
	return e
}

// put adds a new registration with one reference.
func (c *regCache[V]) put(addr uintptr, n int, v V) *regEntry[V] {
	e := &regEntry[V]{key: regKey{addr, n}, refs: 1, val: v}
	c.entries[e.key] = e
	return e
}

// unref drops a reference; an entry left unused joins the LRU list, and
// the oldest unused entries are released while more than limit bytes are
// unused.
func (c *regCache[V]) unref(e *regEntry[V]) {
	e.refs--
	if e.refs > 0 {
		return
	}
	e.elem = c.lru.PushBack(e)
	c.idle += e.key.n
	for c.idle > c.limit {
		old := c.lru.Front().Value.(*regEntry[V])
		c.evict(old)
	}
}

func (c *regCache[V]) evict(e *regEntry[V]) {
	c.lru.Remove(e.elem)
	e.elem = nil
	c.idle -= e.key.n
	delete(c.entries, e.key)
	c.release(e)
}

// clear releases every entry, used or not (the module is closing).
func (c *regCache[V]) clear() {
	for _, e := range c.entries {
		if e.elem != nil {
			c.lru.Remove(e.elem)
		}
		c.release(e)
	}
	c.entries = map[regKey]*regEntry[V]{}
	c.idle = 0
}
