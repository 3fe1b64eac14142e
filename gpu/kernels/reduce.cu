// reduce.cu: gorun's elementwise reduction kernels.
//
//   gorun_reduce_<op>_<type>(T *dst, const T *a, const T *b, unsigned long long n)
//
// computes dst[i] = a[i] <op> b[i] for i < n; dst may equal a or b (in place).
// op is sum, prod, min or max; type is f32, f64, f16, bf16, i32, i64 or u8.
// Integer sums and products wrap (two's complement); float16 and bfloat16 are
// computed with the hardware's correctly rounded half-precision instructions;
// min and max of floats return the other operand when one is NaN (fmin/fmax).
//
// When all three pointers are 16-byte aligned the bulk goes through 16-byte
// loads and stores, UNROLL of them in flight per thread; the remainder (and
// every element of unaligned buffers) goes one element at a time. Launch any
// 1-D grid: each kernel is a grid-stride loop (gpu/reduce.go picks one wave
// of resident blocks).
//
// Regenerate the embedded PTX on a machine with nvcc (the GPU host), from the
// repository root:
//
//   nvcc -ptx -arch=compute_80 -O3 -o gpu/kernels/reduce.ptx gpu/kernels/reduce.cu
//
// compute_80 PTX is JIT-compiled by the driver for the GPU it runs on (sm_80
// and later: A100, H100, H200); bfloat16 arithmetic needs sm_80.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned long long u64;

#define UNROLL 4
#define DEV static __device__ __forceinline__

// Each type's storage and its four operations on storage values.
struct F32 {
  typedef float S;
  DEV S sum(S a, S b) { return __fadd_rn(a, b); }
  DEV S prod(S a, S b) { return __fmul_rn(a, b); }
  DEV S min(S a, S b) { return fminf(a, b); }
  DEV S max(S a, S b) { return fmaxf(a, b); }
};

struct F64 {
  typedef double S;
  DEV S sum(S a, S b) { return __dadd_rn(a, b); }
  DEV S prod(S a, S b) { return __dmul_rn(a, b); }
  DEV S min(S a, S b) { return fmin(a, b); }
  DEV S max(S a, S b) { return fmax(a, b); }
};

struct F16 {
  typedef unsigned short S;
  DEV __half h(S v) { return __ushort_as_half(v); }
  DEV S s(__half v) { return __half_as_ushort(v); }
  DEV S sum(S a, S b) { return s(__hadd(h(a), h(b))); }
  DEV S prod(S a, S b) { return s(__hmul(h(a), h(b))); }
  DEV S min(S a, S b) { return s(__hmin(h(a), h(b))); }
  DEV S max(S a, S b) { return s(__hmax(h(a), h(b))); }
};

struct BF16 {
  typedef unsigned short S;
  DEV __nv_bfloat16 h(S v) { return __ushort_as_bfloat16(v); }
  DEV S s(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
  DEV S sum(S a, S b) { return s(__hadd(h(a), h(b))); }
  DEV S prod(S a, S b) { return s(__hmul(h(a), h(b))); }
  DEV S min(S a, S b) { return s(__hmin(h(a), h(b))); }
  DEV S max(S a, S b) { return s(__hmax(h(a), h(b))); }
};

struct I32 {
  typedef int S;
  DEV S sum(S a, S b) { return (S)((unsigned)a + (unsigned)b); }
  DEV S prod(S a, S b) { return (S)((unsigned)a * (unsigned)b); }
  DEV S min(S a, S b) { return a < b ? a : b; }
  DEV S max(S a, S b) { return a > b ? a : b; }
};

struct I64 {
  typedef long long S;
  DEV S sum(S a, S b) { return (S)((u64)a + (u64)b); }
  DEV S prod(S a, S b) { return (S)((u64)a * (u64)b); }
  DEV S min(S a, S b) { return a < b ? a : b; }
  DEV S max(S a, S b) { return a > b ? a : b; }
};

struct U8 {
  typedef unsigned char S;
  DEV S sum(S a, S b) { return (S)(a + b); }
  DEV S prod(S a, S b) { return (S)(a * b); }
  DEV S min(S a, S b) { return a < b ? a : b; }
  DEV S max(S a, S b) { return a > b ? a : b; }
};

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX };

template <class T, int OP>
DEV typename T::S apply(typename T::S a, typename T::S b) {
  if (OP == OP_SUM) return T::sum(a, b);
  if (OP == OP_PROD) return T::prod(a, b);
  if (OP == OP_MIN) return T::min(a, b);
  return T::max(a, b);
}

// vapply applies the operation to the 16/sizeof(S) elements packed in x and y.
template <class T, int OP>
DEV uint4 vapply(uint4 x, uint4 y) {
  typedef typename T::S S;
  union Pack {
    uint4 v;
    S e[16 / sizeof(S)];
  };
  Pack px, py, pr;
  px.v = x;
  py.v = y;
#pragma unroll
  for (int k = 0; k < (int)(16 / sizeof(S)); k++) pr.e[k] = apply<T, OP>(px.e[k], py.e[k]);
  return pr.v;
}

template <class T, int OP>
DEV void reduce(typename T::S *dst, const typename T::S *a, const typename T::S *b, u64 n) {
  typedef typename T::S S;
  const int V = 16 / sizeof(S);
  const u64 nthreads = (u64)gridDim.x * blockDim.x;
  const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  u64 done = 0;
  if ((((u64)dst | (u64)a | (u64)b) & 15) == 0) {
    const u64 nvec = n / V;
    const uint4 *va = reinterpret_cast<const uint4 *>(a);
    const uint4 *vb = reinterpret_cast<const uint4 *>(b);
    uint4 *vd = reinterpret_cast<uint4 *>(dst);
    u64 i = tid;
    for (; i + (UNROLL - 1) * nthreads < nvec; i += UNROLL * nthreads) {
      uint4 x[UNROLL], y[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        x[u] = va[i + u * nthreads];
        y[u] = vb[i + u * nthreads];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) vd[i + u * nthreads] = vapply<T, OP>(x[u], y[u]);
    }
    for (; i < nvec; i += nthreads) vd[i] = vapply<T, OP>(va[i], vb[i]);
    done = nvec * V;
  }
  for (u64 i = done + tid; i < n; i += nthreads) dst[i] = apply<T, OP>(a[i], b[i]);
}

#define KERNEL(opname, OP, tname, T)                                              \
  extern "C" __global__ void gorun_reduce_##opname##_##tname(                     \
      T::S *dst, const T::S *a, const T::S *b, u64 n) {                           \
    reduce<T, OP>(dst, a, b, n);                                                  \
  }

// EACH_OP(M, tname, T) instantiates M for every operation on type T, and
// EACH_TYPE(M) EACH_OP(M, ...) for every element type: the reduce kernels
// here, the push kernels below.
#define EACH_OP(M, tname, T) \
  M(sum, OP_SUM, tname, T)   \
  M(prod, OP_PROD, tname, T) \
  M(min, OP_MIN, tname, T)   \
  M(max, OP_MAX, tname, T)

#define EACH_TYPE(M)       \
  EACH_OP(M, f32, F32)     \
  EACH_OP(M, f64, F64)     \
  EACH_OP(M, f16, F16)     \
  EACH_OP(M, bf16, BF16)   \
  EACH_OP(M, i32, I32)     \
  EACH_OP(M, i64, I64)     \
  EACH_OP(M, u8, U8)

EACH_TYPE(KERNEL)

// gorun_arpush_<op>_<type>: the whole of a one-shot allreduce over CUDA IPC
// regions, in one kernel (coll/gpupush.go, algorithm "push"):
//
//   (const u64 *regions, const T *in, T *out, u64 n, unsigned nranks,
//    unsigned rank, u64 seq, u64 set, u64 slot, u64 flags, u64 timeout_ns,
//    unsigned *err)
//
// regions[r] is rank r's region as this device addresses it (its own, or a
// peer's mapped by CUDA IPC). A region holds two sets of nranks slots of
// slot bytes (the call uses the one at byte offset set) and, at byte
// offset flags, a u64 flag per (source rank, block): ARPUSH_MAXB per rank.
// Block b owns a chunk of the elements (a multiple of 16 bytes long). It
// stores its chunk of in into slot rank of every peer's set, fences, and
// sets its flag in every peer's region to seq; then it waits until every
// peer has set block b's flag in this rank's region to seq or more, and
// folds the nranks contributions of its chunk in rank order (the same
// order, hence the same bits, at every rank) into out. in may be out: each
// element is read before it is written, by the same thread.
//
// gorun_rspush_<op>_<type>: the reduce-scatter of equal blocks of n
// elements the same way, with one more parameter after n, stride = n: rank
// r's block of in starts at in + r*stride; block p goes to peer p alone,
// and out receives the fold of block rank. (The allreduce is stride 0.) In
// place, out is block 0 of in: block b's threads push that chunk before
// they write out's.
//
// gorun_agpush: the allgather of n bytes per rank (same parameters as
// arpush, n in bytes): in is pushed into slot rank of every peer, copied to
// out + rank*n (unless it is there already), and, once every peer's flag
// has come, every peer's slot is copied to out + p*n.
//
// gorun_rdpush_<op>_<type>: the reduce to rank root the same way, with
// unsigned root after rank: every other rank pushes in into slot rank of
// root's set alone and raises its flag there, and returns without waiting;
// root's blocks wait for every peer's flag and fold into out as the
// allreduce does. out is written, and read, only at root.
//
// gorun_bcpush: the broadcast of n bytes from rank root (parameters
// (const u64 *regions, unsigned char *buf, u64 n, unsigned nranks,
// unsigned rank, unsigned root, then seq onwards as arpush)): root's
// blocks push buf into slot root of every peer's set, raise their flags
// there and return; every other rank's block waits for root's flag and
// copies its chunk of that slot into buf.
//
// Nothing here waits forever: a peer whose flag has not come after
// timeout_ns (a failed peer) makes the block set *err (mapped host memory)
// to 1 and return without writing out; the host reports the error.
#define ARPUSH_MAXB 128

DEV u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// copychunk copies elements [lo, hi) of src to dst, 16 bytes at a time when
// both are 16-byte aligned (lo is a multiple of 16 bytes).
template <class S>
DEV void copychunk(S *dst, const S *src, u64 lo, u64 hi, bool vec) {
  const int V = 16 / sizeof(S);
  u64 i = lo + (u64)threadIdx.x * (vec ? V : 1);
  if (vec) {
    for (; i + V <= hi; i += (u64)blockDim.x * V)
      *reinterpret_cast<uint4 *>(dst + i) = *reinterpret_cast<const uint4 *>(src + i);
    // the tail of fewer than V elements: thread 0
    if (threadIdx.x == 0)
      for (u64 j = lo + (hi - lo) / V * V; j < hi; j++) dst[j] = src[j];
    return;
  }
  for (; i < hi; i += blockDim.x) dst[i] = src[i];
}

// chunkOf sets [lo, hi): block blockIdx.x's chunk of n elements of S,
// a multiple of 16 bytes long.
template <class S>
DEV void chunkOf(u64 n, u64 &lo, u64 &hi) {
  const int V = 16 / sizeof(S);
  u64 per = (n + gridDim.x - 1) / gridDim.x;
  per = (per + V - 1) / V * V;
  lo = (u64)blockIdx.x * per;
  hi = lo + per < n ? lo + per : n;
}

// ALLPEERS and NOPEER name, where signalwait takes one peer, every peer or
// none.
#define ALLPEERS 0xffffffffu
#define NOPEER 0xfffffffeu

// signalwait: after this block's stores into the peers' slots, fence, set
// its flag to seq in the region of peer to (ALLPEERS: every peer's;
// NOPEER: none) and wait until peer from (ALLPEERS, NOPEER likewise) has
// set its flag for this block in this rank's region to seq or more (or the
// timeout passed: *err and false). Every thread of the block calls it.
DEV bool signalwait(const u64 *regions, unsigned nranks, unsigned rank, unsigned to,
                    unsigned from, u64 seq, u64 flags, u64 timeout, unsigned *err) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __threadfence_system();
  __syncthreads();
  const unsigned t = threadIdx.x;
  if (t < nranks && t != rank) {
    if (to == ALLPEERS || to == t) {
      volatile u64 *f = (volatile u64 *)((char *)regions[t] + flags) + (u64)rank * ARPUSH_MAXB + blockIdx.x;
      *f = seq;
    }
    if (from == ALLPEERS || from == t) {
      volatile u64 *g = (volatile u64 *)((char *)regions[rank] + flags) + (u64)t * ARPUSH_MAXB + blockIdx.x;
      const u64 start = globaltimer();
      while (*g < seq) {
        if (globaltimer() - start > timeout) {
          failed = 1;
          *(volatile unsigned *)err = 1;
          break;
        }
      }
      __threadfence_system();
    }
  }
  __syncthreads();
  return !failed;
}

template <class T, int OP>
DEV void arpush(const u64 *regions, const typename T::S *in, typename T::S *out, u64 n,
                u64 stride, unsigned nranks, unsigned rank, unsigned root, u64 seq, u64 set,
                u64 slot, u64 flags, u64 timeout, unsigned *err) {
  typedef typename T::S S;
  const int V = 16 / sizeof(S);
  u64 lo, hi;
  chunkOf<S>(n, lo, hi);
  char *own = (char *)regions[rank];
  const bool vec = (((u64)in | (u64)out | set | slot | stride * sizeof(S)) & 15) == 0;
  // root == ALLPEERS: every rank folds (allreduce, reduce-scatter); else
  // only root does, and the others push to it alone (reduce).
  const bool folds = root == ALLPEERS || root == rank;
  for (unsigned p = 0; p < nranks; p++) {
    if (p == rank || (root != ALLPEERS && p != root)) continue;
    S *dst = (S *)((char *)regions[p] + set + (u64)rank * slot);
    if (lo < hi) copychunk<S>(dst, in + p * stride, lo, hi, vec);
  }
  if (!signalwait(regions, nranks, rank, root == rank ? NOPEER : root, folds ? ALLPEERS : NOPEER,
                  seq, flags, timeout, err) ||
      !folds || lo >= hi)
    return;
  in += rank * stride;  // this rank's own contribution
  const unsigned t = threadIdx.x;
  u64 done = lo;
  if (vec) {
    // 16 bytes at a time; the chunk starts on a 16-byte boundary.
    const u64 vlo = lo / V, vhi = vlo + (hi - lo) / V;
    for (u64 i = vlo + t; i < vhi; i += blockDim.x) {
      uint4 acc = rank == 0 ? reinterpret_cast<const uint4 *>(in)[i]
                            : reinterpret_cast<const uint4 *>(own + set)[i];
      for (unsigned r = 1; r < nranks; r++) {
        const uint4 x = r == rank ? reinterpret_cast<const uint4 *>(in)[i]
                                  : reinterpret_cast<const uint4 *>(own + set + (u64)r * slot)[i];
        acc = vapply<T, OP>(acc, x);
      }
      reinterpret_cast<uint4 *>(out)[i] = acc;
    }
    done = vhi * V;
  }
  for (u64 i = done + t; i < hi; i += blockDim.x) {
    S acc = rank == 0 ? in[i] : ((const S *)(own + set))[i];
    for (unsigned r = 1; r < nranks; r++) {
      const S x = r == rank ? in[i] : ((const S *)(own + set + (u64)r * slot))[i];
      acc = apply<T, OP>(acc, x);
    }
    out[i] = acc;
  }
}

#define ARPUSH(opname, OP, tname, T)                                                          \
  extern "C" __global__ void gorun_arpush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, unsigned nranks, unsigned rank,    \
      u64 seq, u64 set, u64 slot, u64 flags, u64 timeout, unsigned *err) {                     \
    arpush<T, OP>(regions, in, out, n, 0, nranks, rank, ALLPEERS, seq, set, slot, flags,       \
                  timeout, err);                                                               \
  }                                                                                            \
  extern "C" __global__ void gorun_rspush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, u64 stride, unsigned nranks,       \
      unsigned rank, u64 seq, u64 set, u64 slot, u64 flags, u64 timeout, unsigned *err) {      \
    arpush<T, OP>(regions, in, out, n, stride, nranks, rank, ALLPEERS, seq, set, slot, flags,  \
                  timeout, err);                                                               \
  }                                                                                            \
  extern "C" __global__ void gorun_rdpush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, unsigned nranks, unsigned rank,    \
      unsigned root, u64 seq, u64 set, u64 slot, u64 flags, u64 timeout, unsigned *err) {      \
    arpush<T, OP>(regions, in, out, n, 0, nranks, rank, root, seq, set, slot, flags, timeout,  \
                  err);                                                                        \
  }

EACH_TYPE(ARPUSH)

extern "C" __global__ void gorun_agpush(const u64 *regions, const unsigned char *in,
                                        unsigned char *out, u64 n, unsigned nranks,
                                        unsigned rank, u64 seq, u64 set, u64 slot, u64 flags,
                                        u64 timeout, unsigned *err) {
  typedef unsigned char S;
  u64 lo, hi;
  chunkOf<S>(n, lo, hi);
  const bool vec = (((u64)in | (u64)out | set | slot | n) & 15) == 0;
  for (unsigned p = 0; p < nranks; p++) {
    if (lo >= hi) break;
    S *dst = p == rank ? out + (u64)rank * n : (S *)((char *)regions[p] + set + (u64)rank * slot);
    if (dst != in) copychunk<S>(dst, in, lo, hi, vec);
  }
  if (!signalwait(regions, nranks, rank, ALLPEERS, ALLPEERS, seq, flags, timeout, err) || lo >= hi)
    return;
  const char *own = (const char *)regions[rank] + set;
  for (unsigned p = 0; p < nranks; p++) {
    if (p == rank) continue;
    // copychunk copies [lo, hi) of src to the same offsets of dst.
    copychunk<S>(out + (u64)p * n, (const S *)(own + (u64)p * slot), lo, hi, vec);
  }
}

extern "C" __global__ void gorun_bcpush(const u64 *regions, unsigned char *buf, u64 n,
                                        unsigned nranks, unsigned rank, unsigned root, u64 seq,
                                        u64 set, u64 slot, u64 flags, u64 timeout,
                                        unsigned *err) {
  typedef unsigned char S;
  u64 lo, hi;
  chunkOf<S>(n, lo, hi);
  const bool vec = (((u64)buf | set | slot) & 15) == 0;
  if (rank == root) {
    for (unsigned p = 0; p < nranks && lo < hi; p++)
      if (p != rank) copychunk<S>((S *)((char *)regions[p] + set + (u64)rank * slot), buf, lo, hi, vec);
    signalwait(regions, nranks, rank, ALLPEERS, NOPEER, seq, flags, timeout, err);
    return;
  }
  if (!signalwait(regions, nranks, rank, NOPEER, root, seq, flags, timeout, err) || lo >= hi) return;
  copychunk<S>(buf, (const S *)((const char *)regions[rank] + set + (u64)root * slot), lo, hi, vec);
}
