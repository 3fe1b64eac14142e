// probe.cu: kernels that time pieces of a push collective's floor
// (floor_test.go, BenchmarkGPUFloor). Test data, not part of the runtime.
// Generate the PTX on the GPU host, from the repository root:
//
//   nvcc -ptx -arch=compute_80 -O3 -o gpu/testdata/probe.ptx gpu/testdata/probe.cu

typedef unsigned long long u64;

static __device__ __forceinline__ u64 gtimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// probe_signal: thread 0 of block 0 sets *w (mapped host memory) to v after
// a system-wide fence, as a push kernel's last block sets its completion
// word.
extern "C" __global__ void probe_signal(volatile u64 *w, u64 v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    __threadfence_system();
    *w = v;
  }
}

// probe_pingpong: iters round trips of a flag between this GPU's kernel
// and a peer GPU's (both launched at once): the pinger (first != 0) sets
// *peer (the peer's memory) to base+i and waits until *mine (its own) is
// base+i; the ponger waits, then answers. out[0] receives the elapsed
// nanoseconds, out[1] 1 if a wait gave up after a second.
extern "C" __global__ void probe_pingpong(volatile u64 *mine, volatile u64 *peer, u64 base, unsigned iters,
                                          unsigned first, u64 *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const u64 t0 = gtimer();
  out[1] = 0;
  for (unsigned i = 1; i <= iters; i++) {
    const u64 v = base + i;
    if (first) *peer = v;
    while (*mine != v)
      if (gtimer() - t0 > 1000000000ull) {
        out[1] = 1;
        return;
      }
    if (!first) *peer = v;
  }
  out[0] = gtimer() - t0;
}

// probe_fence: the block's threads store n bytes (a multiple of 16) to dst
// (this GPU's memory, or a peer's), 16 at a time, meet at a barrier, fence
// as mode says and meet again; out[0] receives thread 0's time from the
// first barrier to the second, in ns. mode: 0, every thread
// __threadfence_system() (fence.sc.sys); 1, thread 0 alone fence.sc.sys;
// 2, thread 0 fence.acq_rel.sys; 3, thread 0 fence.acq_rel.gpu; 4, every
// thread __threadfence() (fence.sc.gpu); 5, no fence.
extern "C" __global__ void probe_fence(uint4 *dst, u64 n, unsigned mode, u64 *out) {
  const uint4 v = make_uint4(threadIdx.x, 1, 2, 3);
  for (u64 i = threadIdx.x; i < n / 16; i += blockDim.x) dst[i] = v;
  __syncthreads();
  const u64 t0 = gtimer();
  switch (mode) {
    case 0:
      __threadfence_system();
      break;
    case 1:
      if (threadIdx.x == 0) __threadfence_system();
      break;
    case 2:
      if (threadIdx.x == 0) asm volatile("fence.acq_rel.sys;" ::: "memory");
      break;
    case 3:
      if (threadIdx.x == 0) asm volatile("fence.acq_rel.gpu;" ::: "memory");
      break;
    case 4:
      __threadfence();
      break;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[0] = gtimer() - t0;
}

// probe_serve: the floor of a persistent kernel that the host hands calls
// to through mapped host memory instead of launching one kernel a call.
// For i = 1..iters (v = base+i), thread 0 of every block waits until the
// host's command word *cmd is v; with peer set, block 0's then bounces a
// flag with the peer GPU's serve kernel (a release at system scope, its
// store into the peer's memory, the wait for the peer's in its own), as
// a push call's flags do; each block then counts itself in *count (after
// a GPU-scope fence, as a push kernel's blocks do) and the last sets the
// host's answer word *ans to v. out[1] is set to 1 if a wait gave up
// (30 seconds after the kernel began).
extern "C" __global__ void probe_serve(volatile u64 *cmd, volatile u64 *ans, volatile u64 *mine,
                                       volatile u64 *peer, unsigned long long *count, u64 base,
                                       unsigned iters, unsigned usePeer, u64 *out) {
  __shared__ int failed;
  const u64 t0 = gtimer();
  if (threadIdx.x == 0) failed = 0;
  for (unsigned i = 1; i <= iters; i++) {
    const u64 v = base + i;
    if (threadIdx.x == 0) {
      while (*cmd != v)
        if (gtimer() - t0 > 1000000000ull * 30) {
          failed = 1;
          break;
        }
      if (!failed && usePeer && blockIdx.x == 0) {
        asm volatile("fence.acq_rel.sys;" ::: "memory");
        *peer = v;
        while (*mine != v)
          if (gtimer() - t0 > 1000000000ull * 30) {
            failed = 1;
            break;
          }
      }
    }
    __syncthreads();
    if (failed) {
      if (threadIdx.x == 0) out[1] = 1;
      return;
    }
    if (threadIdx.x == 0) {
      __threadfence();
      if ((atomicAdd(count, 1ull) + 1) % gridDim.x == 0) *ans = v;
    }
  }
}

// probe_fma: a compute-bound kernel, a program's own work that wants every
// SM (BenchmarkGPUFloor's +fma variants): each thread runs iters rounds of
// four independent FMA chains and stores their sum.
extern "C" __global__ void probe_fma(float *out, unsigned iters) {
  float a = threadIdx.x, b = blockIdx.x, c = 1.0f, d = 2.0f;
  for (unsigned i = 0; i < iters; i++) {
    a = fmaf(a, 0.999f, 1.0f);
    b = fmaf(b, 0.999f, 1.0f);
    c = fmaf(c, 0.999f, 1.0f);
    d = fmaf(d, 0.999f, 1.0f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}
