package cuda

import (
	"fmt"
	"sync/atomic"
)

// Context is a device's primary context, retained by this process. Every
// call made through it (and through the streams, events, modules and memory
// it hands out) makes it current on the calling OS thread first, inside the
// same cgo call, so callers need not lock goroutines to threads.
//
// A Context is safe for concurrent use.
type Context struct {
	h        uintptr
	dev      Device
	released atomic.Bool
}

// PrimaryContext retains d's primary context (cuDevicePrimaryCtxRetain): the
// one context per device that every library in the process shares, so memory
// allocated by another library (PyTorch, NCCL) works with this one.
func PrimaryContext(d Device) (*Context, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	h, r := drvPrimaryCtxRetain(int(d))
	if err := check("cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, fmt.Errorf("device %d: %w", d, err)
	}
	return &Context{h: h, dev: d}, nil
}

// ContextFlags are a primary context's scheduling flags (CU_CTX_SCHED_*):
// how a host thread waits in a synchronizing call (cuStreamSynchronize).
type ContextFlags uint32

// Scheduling flags (cuda.h). SchedAuto, the default, spins while the
// process has fewer active contexts than the machine has logical CPUs and
// yields otherwise.
const (
	SchedAuto         ContextFlags = 0
	SchedSpin         ContextFlags = 1
	SchedYield        ContextFlags = 2
	SchedBlockingSync ContextFlags = 4
	schedMask         ContextFlags = 7
)

// String names the scheduling part of the flags.
func (f ContextFlags) String() string {
	switch f & schedMask {
	case SchedAuto:
		return "auto"
	case SchedSpin:
		return "spin"
	case SchedYield:
		return "yield"
	case SchedBlockingSync:
		return "blocking-sync"
	}
	return fmt.Sprintf("ContextFlags(%#x)", uint32(f))
}

// PrimaryContextState returns d's primary context flags and whether it is
// active (retained by someone in this process) (cuDevicePrimaryCtxGetState).
func PrimaryContextState(d Device) (ContextFlags, bool, error) {
	if err := Init(); err != nil {
		return 0, false, err
	}
	f, active, r := drvPrimaryCtxGetState(int(d))
	return ContextFlags(f), active, check("cuDevicePrimaryCtxGetState", r)
}

// SetPrimaryContextFlags sets d's primary context flags
// (cuDevicePrimaryCtxSetFlags). Call it before the context is first
// retained (older drivers refuse to change an active one).
func SetPrimaryContextFlags(d Device, f ContextFlags) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuDevicePrimaryCtxSetFlags", drvPrimaryCtxSetFlags(int(d), uint32(f)))
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Handle returns the raw CUcontext, for passing to other CUDA libraries.
func (c *Context) Handle() uintptr { return c.h }

// Release drops this process's reference to the primary context. Memory,
// streams and modules of the context must be freed first. A second Release is
// a no-op.
func (c *Context) Release() error {
	if c.released.Swap(true) {
		return nil
	}
	return check("cuDevicePrimaryCtxRelease_v2", drvPrimaryCtxRelease(int(c.dev)))
}

// Synchronize waits until all work queued on the context's streams is done.
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", drvCtxSynchronize(c.h))
}

// EnablePeerAccess maps peer's memory into c (cuCtxEnablePeerAccess), so
// that kernels and copies issued in c can use peer's device pointers
// directly. Enabling it twice is not an error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	r := drvCtxEnablePeerAccess(c.h, peer.h)
	if r == ErrorPeerAccessAlreadyEnabled {
		return nil
	}
	if err := check("cuCtxEnablePeerAccess", r); err != nil {
		return fmt.Errorf("device %d to device %d: %w", c.dev, peer.dev, err)
	}
	return nil
}

// MemInfo returns the device's free and total memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	f, t, r := drvMemGetInfo(c.h)
	return f, t, check("cuMemGetInfo_v2", r)
}
