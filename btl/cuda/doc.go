// Package cuda is the transport for GPU memory between ranks of one host:
// it implements btl.RMA on device memory through CUDA IPC, and copies with
// the GPUs' copy engines (over NVLink or PCIe peer access, which the driver
// enables when it maps a peer's memory; without peer access the driver
// stages the copy itself). It carries no frames: its Reach reaches nobody,
// and the rendezvous around its Get and Put (RTS, CTS, FIN) travels over
// the route's frame transport (sm between ranks of one host). p2p picks it
// for a transfer whose sender's buffer is device memory (btl/doc.go, RMA).
//
// It opens where the NVIDIA driver lists GPUs (/proc/driver/nvidia/gpus)
// and the binary was built with cgo (libcuda.so.1 is loaded at run time,
// by package gpu); elsewhere Open fails and the job runs without it. Open
// does not initialise CUDA: the first Register or Get does, so that
// programs that never touch device memory do not pay cuInit at launch. It
// publishes "ipc" as its address, so that peers know it is open here.
//
// # Calls and their completion (the contract of btl/doc.go)
//
//   - RMAKinds(peer): device memory, for a peer on this host that opened
//     this transport too (its card has a cuda address), this rank included.
//   - Register(mem, &region): device memory only. The region's key is the
//     CUDA IPC handle (cuIpcGetMemHandle, 64 bytes) of the allocation that
//     holds mem, its Addr the offset of mem in that allocation, its Len
//     mem's length. Handles are cached (export.go) by device, base address
//     and the driver's buffer id, which tells an allocation freed and made
//     again at the same address from the old one; up to
//     GORUN_CUDA_IPC_EXPORT_CACHE of them. Deregister releases nothing on
//     this side.
//   - Get(op) and Put(op): the peer's allocation is mapped into this
//     process (cuIpcOpenMemHandle, ~100 µs, so mappings are cached by
//     handle, up to GORUN_CUDA_IPC_CACHE of them, the oldest unmapped
//     first); the copy is queued on a stream of the local buffer's device
//     with an event behind it, and the call returns. Progress polls the
//     events (cuEventQuery, never a wait) and calls RMADone when one has
//     completed: the bytes are then in place. A driver error fails the
//     operation through RMADone. A region from this rank itself is not
//     mapped (CUDA refuses a process its own handles): its allocation is
//     found among this rank's registrations and copied within the process.
//   - Close: pending copies are waited for (the memory they name belongs
//     to requests that are failing), then fail with btl.ErrClosed; mappings
//     are unmapped.
//
// # Streams
//
// Copies run on a stream of this module's own, one per device, that does
// not synchronize with the legacy default stream. A sender must have
// finished writing its buffer (its own streams synchronized) before the
// send starts; a receive is complete, its data in place for any stream,
// once the request completes. Package mpi documents this for users.
//
// # Concurrency
//
// As package btl says: every method but Close is called with the engine's
// lock held; the module starts no goroutines. RMADone is called from inside
// Progress.
package cuda
