package cuda

import "fmt"

// IPCMemHandle names a device allocation so that another process on the same
// host can map it (cuIpcGetMemHandle). It names the whole allocation that
// holds the pointer: pass the offset alongside for a sub-range. It is plain
// bytes, safe to send over any channel, and only as secret as that channel.
type IPCMemHandle [64]byte

// IPCEventHandle names an interprocess event (cuIpcGetEventHandle).
type IPCEventHandle [64]byte

// ipcLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: map memory
// of another device through peer access when first used.
const ipcLazyEnablePeerAccess = 0x1

// IPCGetMemHandle returns the handle of the allocation holding p, which must
// come from MemAlloc (the legacy IPC that cuIpcGetMemHandle serves).
func (c *Context) IPCGetMemHandle(p DevicePtr) (IPCMemHandle, error) {
	h, r := drvIpcGetMemHandle(c.h, p)
	if err := check("cuIpcGetMemHandle", r); err != nil {
		return IPCMemHandle{}, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return IPCMemHandle(h), nil
}

// IPCOpenMemHandle maps another process's allocation into c and returns its
// base address here (cuIpcOpenMemHandle_v2, with peer access enabled lazily
// when the memory lives on another device). A handle may be opened only once
// per context in a process; the exporting process itself cannot open it.
// Unmap with IPCCloseMemHandle; the exporter must not free the memory while
// it is mapped elsewhere.
func (c *Context) IPCOpenMemHandle(h IPCMemHandle) (DevicePtr, error) {
	p, r := drvIpcOpenMemHandle(c.h, h, ipcLazyEnablePeerAccess)
	if err := check("cuIpcOpenMemHandle_v2", r); err != nil {
		return 0, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return p, nil
}

// IPCCloseMemHandle unmaps memory mapped by IPCOpenMemHandle.
func (c *Context) IPCCloseMemHandle(p DevicePtr) error {
	return check("cuIpcCloseMemHandle", drvIpcCloseMemHandle(c.h, p))
}

// IPCHandle returns a handle to an event created with EventInterprocess and
// EventDisableTiming, for another process to open with IPCOpenEventHandle.
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	h, r := drvIpcGetEventHandle(e.ctx.h, e.h)
	return IPCEventHandle(h), check("cuIpcGetEventHandle", r)
}

// IPCOpenEventHandle opens another process's interprocess event: streams
// here can wait on it (Stream.WaitEvent) and Synchronize waits for it.
func (c *Context) IPCOpenEventHandle(h IPCEventHandle) (*Event, error) {
	e, r := drvIpcOpenEventHandle(c.h, h)
	if err := check("cuIpcOpenEventHandle", r); err != nil {
		return nil, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return &Event{ctx: c, h: e}, nil
}
