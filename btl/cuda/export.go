package cuda

import drv "github.com/gorun/gorun/gpu/cuda"

// The export cache: Register names an allocation by its CUDA IPC handle,
// and cuIpcGetMemHandle costs ~20 µs, paid on every rendezvous piece
// before this cache. An entry is keyed by what identifies an allocation
// for the life of the process: its device, its base address
// (cuMemGetAddressRange) and the driver's buffer id
// (CU_POINTER_ATTRIBUTE_BUFFER_ID), so a lookup costs two cheap driver
// queries (the range, which Register needs anyway, and the id).
//
// What invalidates an entry:
//   - the allocation is freed and another made at the same base: the new
//     one has another buffer id, hence another key, and is exported afresh;
//     the stale entry is never served again and ages out;
//   - a size that differs from the entry's (an allocation of another size
//     at the same base and id cannot happen, but it is checked anyway):
//     exported afresh, the entry replaced;
//   - more than GORUN_CUDA_IPC_EXPORT_CACHE entries: the least recently
//     used is dropped (a handle holds no resource, so dropping one frees
//     nothing but the entry);
//   - Close.
//
// Where the driver cannot tell a buffer id (an error from the query),
// Register exports every time, as it did before the cache.

type exportKey struct {
	dev  int
	base drv.DevicePtr
	id   uint64
}

type exportEntry struct {
	h    drv.IPCMemHandle
	size uint64
	used uint64 // clock at last use
}

// exportCache maps allocations to their IPC handles, at most limit of
// them (0: no cache). Called under the engine lock, as every module
// method.
type exportCache struct {
	m     map[exportKey]*exportEntry
	limit int
	clock uint64
}

// get returns the cached handle of the allocation k of size bytes.
func (c *exportCache) get(k exportKey, size uint64) (drv.IPCMemHandle, bool) {
	e := c.m[k]
	if e == nil || e.size != size {
		return drv.IPCMemHandle{}, false
	}
	c.clock++
	e.used = c.clock
	return e.h, true
}

// put records h as the handle of allocation k, dropping the least recently
// used entry beyond the limit.
func (c *exportCache) put(k exportKey, size uint64, h drv.IPCMemHandle) {
	if c.limit <= 0 {
		return
	}
	if c.m == nil {
		c.m = map[exportKey]*exportEntry{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.limit {
		var old exportKey
		var oldest *exportEntry
		for k, e := range c.m {
			if oldest == nil || e.used < oldest.used {
				old, oldest = k, e
			}
		}
		delete(c.m, old)
	}
	c.clock++
	c.m[k] = &exportEntry{h: h, size: size, used: c.clock}
}

// handle returns the IPC handle of the allocation at base (size bytes) on
// device dev, from the cache or exported now.
func (m *module) handle(ctx *drv.Context, dev int, base drv.DevicePtr, size uint64) (drv.IPCMemHandle, error) {
	id, idErr := ctx.BufferID(base)
	k := exportKey{dev: dev, base: base, id: id}
	if idErr == nil {
		if h, ok := m.exports.get(k, size); ok {
			return h, nil
		}
	}
	h, err := ctx.IPCGetMemHandle(base)
	if err != nil {
		return h, err
	}
	if idErr == nil {
		m.exports.put(k, size, h)
	}
	return h, nil
}
