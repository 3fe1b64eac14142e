// Package gpu is gorun's GPU layer: what the host has (Discover, the
// topology that `gorun --topo` prints), device memory the mpi API accepts
// (Buffer), the project's own reduction kernels (Reduce), and CUDA IPC for
// moving buffers between processes (ExportIPC, OpenIPC). The CUDA driver
// itself is reached through the subpackage cuda, and the kernels' source
// and PTX live in the subpackage kernels.
//
// # Contract
//
//   - Never required: every binary builds without the CUDA toolkit and runs
//     on machines without a GPU. libnvidia-ml.so.1 and libcuda.so.1 are
//     loaded at run time; without them, without a GPU, or in a binary built
//     with CGO_ENABLED=0, Discover reports "no GPU: <reason>" in
//     Topology.NoGPU and every other call returns an error wrapping ErrNoGPU.
//     Nothing panics on a driver or device failure.
//   - Callers: cmd/gorun (WriteTopology for --topo), mpi (Buffer in place of
//     slices, PointerInfo), btl/cuda (Topology.Route, ExportIPC/OpenIPC,
//     peer copies), coll (Reduce in GPU collectives). Any goroutine may call
//     anything; no call needs a locked OS thread.
//   - Devices are CUDA ordinals (Buffer.Device, DeviceContext); Topology
//     lists GPUs in NVML order, as nvidia-smi does, and maps each to its CUDA
//     ordinal (GPU.CUDA).
//   - Blocking: Discover, Alloc, Free, the Copy* and Upload/Download helpers,
//     ExportIPC and OpenIPC return when done. Reduce and the push kernels
//     (AllreducePush and its kin) only queue the kernel on the caller's
//     stream: its buffers must stay allocated until the stream passes it,
//     or, for a push kernel, until PushWords.Wait returned (which polls a
//     completion word in mapped host memory, and synchronizes the stream
//     only when the kernel gave up waiting, when the poll outlasts its
//     spin, or with no spin: an output on another GPU).
//   - Ownership: a Buffer from Alloc or OpenIPC owns its memory until Free
//     (which must see the Buffer it returned); one from Wrap borrows memory
//     that its allocator frees. Contexts are the devices' primary contexts,
//     retained once per process and kept, so memory from PyTorch, CuPy or
//     NCCL in the same process works through Wrap.
//   - Kernels: JIT-compiled from embedded PTX at the first Reduce on each
//     device (LoadKernels does it up front); see docs/gpu.md to regenerate.
//   - Never used: managed memory and NVLink multicast (which can take shared
//     GPUs out of service).
package gpu
