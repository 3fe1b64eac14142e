// Package boot is the rank side of the wire-up, and the vocabulary that the
// launcher and the ranks share.
//
// A rank started by gorun finds its place in the environment (env.go) and
// its job secret on an inherited control socket (ctl.go), never in argv or
// a file. Init then joins the job's memberlist, encrypted with a key derived
// from the secret, publishing the rank's business card (transport
// addresses and placement) as node metadata; the launcher, which knows the world size,
// waits until every rank has joined and pushes the complete roster to each
// (gossip alone converges in seconds at 32+ nodes; the push makes Init a
// fence of milliseconds). After Init memberlist is the failure detector:
// Session.Failures reports ranks declared dead.
//
// The control socket carries the rank's life-cycle to the launcher: that it
// finalized, or that it aborts with a code. Without gorun (no GORUN_RANK in
// the environment) a rank is a singleton world of size 1 and nothing here
// touches the network.
//
// # Placement
//
// A card carries the rank's Placement, which package mpi hands to the
// transports (btl.Env for its own, btl.Peer for every peer's). Each rank
// finds its own, at Init, from what is already there (placement.go):
//
//   - local rank and size: GORUN_LOCAL_RANK and GORUN_LOCAL_SIZE, set by
//     gorun;
//   - NUMA node: the node whose cpulist (/sys/devices/system/node) holds
//     every CPU of the rank's affinity (sched_getaffinity, after gorun's
//     --bind-to), else -1;
//   - NICs: the interface that holds GORUN_BIND_ADDR, the address the
//     rank's transports listen on (none without one);
//   - GPUs: the PCI bus ids of the GPUs the NVIDIA driver lists in
//     /proc/driver/nvidia/gpus that the rank may open (/dev/nvidiaN), in
//     PCI bus order, selected and ordered by CUDA_VISIBLE_DEVICES as CUDA
//     does (indices or UUIDs); none where the driver is absent.
//
// GPUs come from the rank, not the launcher, because nothing else is
// cheaper and as correct: NVML or CUDA would cost every Init tens to
// hundreds of milliseconds on a GPU host even for programs that never
// touch a GPU (gpu.Discover says so), the launcher and its agents do no
// GPU discovery on an ordinary launch (only gorun --topo does), and only
// the rank knows its own CUDA_VISIBLE_DEVICES (set by a wrapper script,
// or -x) and which device nodes its container lets it open. A directory
// listing and a few sysfs reads suffice; the driver's per-GPU information
// files, which cost a call into each GPU (~170 µs each on the H200 host),
// are read only when CUDA_VISIBLE_DEVICES names UUIDs or some device
// nodes are missing. The order is CUDA's when it numbers by PCI bus,
// which its default (fastest first) does in practice among GPUs of one
// model; on a host with several models (PCI device ids) GPUs is left
// empty (unknown) unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and a transport
// that needs certainty asks CUDA (cuDeviceGetPCIBusId) once it
// initialises it. MIG instances are not resolved to their GPU.
// TestVisibleGPUsMatchCUDA compares the result with CUDA's on a GPU host.
// A whole placement costs ~0.1 ms (BenchmarkPlacement).
//
// boot knows nothing of tags, communicators or transports' internals.
package boot
