// Package cuda is gorun's access to the CUDA driver API, loaded at run time.
//
// Nothing here needs the CUDA toolkit to build: the package declares the few
// driver types it uses itself and opens libcuda.so.1 with dlopen on first
// use (Init). A binary built with CGO_ENABLED=0, or run on a machine without
// the driver or without a GPU, works the same except that Init returns an
// error wrapping ErrNoDriver or ErrNoDevice with the reason; every other
// call then returns that error too. Nothing panics on a driver failure.
//
// # Contract
//
//   - Callers: package gpu (topology, buffers, kernels), btl/cuda (IPC
//     handles, peer copies), coll (GPU collectives). Any goroutine may call
//     anything: the driver is thread-safe, and every call that needs a
//     context makes its Context current inside the same cgo call, so no
//     goroutine needs runtime.LockOSThread.
//   - Contexts are primary contexts (PrimaryContext), the ones the CUDA
//     runtime, PyTorch and NCCL use, so device pointers from those libraries
//     work here and the other way round.
//   - Errors: every failed driver call is an *Error naming the entry point
//     ("cuMemAlloc_v2") and the CUresult by its driver name
//     ("CUDA_ERROR_OUT_OF_MEMORY"), usually wrapped with the device.
//     errors.Is(err, cuda.ErrorOutOfMemory) matches the code.
//   - Blocking: calls without Async in their name return when the work is
//     done (or, for Launch and the Async methods, queued). Synchronize, Done
//     and events tell when queued work completes.
//   - Ownership: device memory (MemAlloc), pinned host memory (HostAlloc),
//     streams, events, modules and IPC mappings belong to the caller until it
//     frees, destroys, unloads or closes them; host memory named in an Async
//     call must stay alive and unmoved until the stream has passed it.
//   - Never used here: managed memory and NVLink multicast objects (on the
//     lent GPU hosts multicast can take the shared GPUs out of service).
package cuda
