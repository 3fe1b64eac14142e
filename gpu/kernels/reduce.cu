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
//    unsigned rank, u64 seq, u64 wset, u64 need, u64 slot, u64 flags,
//    u64 timeout_ns, unsigned *err, u64 *done)
//
// regions[r] is rank r's region as this device addresses it (its own, or a
// peer's mapped by CUDA IPC). A region holds two sets of nranks slots of
// slot bytes (set 0 at byte 0, set 1 at nranks*slot) and, at byte offset
// flags, the words of the push kernels (every one zeroed before first use):
//
//   data(src, s, b)  u64 [nranks][2][ARPUSH_MAXB]  src's block b stored its
//                    chunk into slot src of set s here, for call seq (the
//                    value)
//   ack(src)         u64 [nranks]   src's kernel for call seq (the value)
//                    has begun: src's earlier calls are over, so nothing
//                    there still reads what was pushed to src before seq
//   prog(b)          u64 [ARPUSH_MAXB]  this rank's own block b's progress
//                    in call seq: 4*seq+1 pushed, 4*seq+2 done (read back
//                    when the host relaunches a call that timed out)
//   fin              u64  how many of this rank's blocks are done with the
//                    current call (over all its launches); set back to 0
//                    by the block that completes the count
//
// There is no host barrier before a call: seq (every rank's calls number
// alike, from 1, growing) tells the calls apart, and each rank writes its
// pushes into the two sets in turn (wset, the byte offset of this call's
// set), so that one call's data never overwrites data a peer may still
// read: a rank writes a set again only once every peer it writes to has
// acknowledged (ack >= need) a call after the one that last wrote it.
// Readers find the set a peer chose from the data word that holds seq.
//
// Block b owns a chunk of the elements (a multiple of 16 bytes long). It
// waits for the acks it needs, stores its chunk of in into slot rank of
// every peer's set wset, fences, and sets data(rank, wset, b) in every
// peer's region to seq; then it waits until every peer p has set data(p,
// s, b) here to seq (in either set s), and folds the nranks contributions of
// its chunk in rank order (the same order, hence the same bits, at every
// rank) into out. in may be out: each element is read before it is
// written, by the same thread.
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
// out + rank*n (unless it is there already), and, once every peer's data
// word has come, every peer's slot is copied to out + p*n.
//
// gorun_rdpush_<op>_<type>: the reduce to rank root the same way, with
// unsigned root after rank: every other rank pushes in into slot rank of
// root's set alone and sets its data words there, and returns without
// waiting for them to be read; root's blocks wait for every peer's data
// words and fold into out as the allreduce does. out is written, and read,
// only at root.
//
// gorun_bcpush: the broadcast of n bytes from rank root (parameters
// (const u64 *regions, unsigned char *buf, u64 n, unsigned nranks,
// unsigned rank, unsigned root, then seq onwards as arpush)): root's
// blocks push buf into slot root of every peer's set, set their data words
// there and return; every other rank's block waits for root's data word and
// copies its chunk of that slot into buf.
//
// Every rank's block 0 acknowledges seq in every peer's region as it
// begins, whatever its part in the call.
//
// The host waits for a call by polling *done (mapped host memory), not by
// synchronizing the stream (gpu/pushwait.go; a synchronization returns
// some microseconds after the kernel's last store, coll/MEASUREMENTS.md,
// GPU collectives): each block, once done with the call, fences its
// stores and counts itself in fin; the block that completes the count sets
// fin back to 0 (no launch of the call comes after it, and the next call's
// kernel runs after this one on the stream) and *done to seq (finish says
// why no system-scope fence is needed). A block done in an earlier launch of the same call
// counted then; a block that timed out does not count, so *done is set
// only by the launch that completes the call.
//
// Ordering, as NCCL posts and waits for its steps: a block's threads
// store, meet at a barrier, and only the threads that signal fence
// (release: fence.acq_rel.sys, then the flag's volatile store); a waiting
// thread polls the flag with volatile loads, the block meets at a barrier
// and reads the peers' data at L2 (fromPeer) with no fence. Every thread's
// __threadfence_system() (fence.sc.sys) cost 2.2 us and one thread's
// fence.acq_rel.sys 1.8 us on an H100, fence.acq_rel.gpu 0.6 (with the
// barriers; coll/MEASUREMENTS.md), so a call pays one system-scope fence
// (the release) where it paid three. The count in fin is within the GPU,
// scope .gpu.
//
// Nothing here waits forever: a wait not satisfied after timeout_ns makes
// the block set *err (mapped host memory) to 1 and return, its progress
// kept in prog(b). The host then checks that the peers live and the call
// was not aborted, and launches the same call again: each block resumes
// where it stopped (a block that pushed does not push again; a block that
// folded is done).
#define ARPUSH_MAXB 128
// ARPUSH_MAXR bounds nranks: one thread of a block per peer.
#define ARPUSH_MAXR 512

// fenceSys and fenceGpu: fence.acq_rel at system and GPU scope (CUDA's
// __threadfence_system() and __threadfence() are the stronger, and here
// dearer, fence.sc).
DEV void fenceSys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
DEV void fenceGpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

DEV u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// fromPeer loads what a peer stored into this rank's region, at L2
// (ld.global.cg), never from an L1 line that may hold an earlier call's
// bytes: with the peer's flag seen by a volatile load and the block met at
// a barrier, that is how NCCL reads a peer's data without an acquire fence
// (a system-scope fence costs about 1.5 us, coll/MEASUREMENTS.md); the
// peer's release made its stores reach this GPU before its flag.
template <class S>
DEV S fromPeer(const S *p) {
  return __ldcg(p);
}

// copychunk copies elements [lo, hi) of src to dst, 16 bytes at a time when
// both are 16-byte aligned (lo is a multiple of 16 bytes); PEER: src is
// this rank's region, read with fromPeer.
template <class S, bool PEER = false>
DEV void copychunk(S *dst, const S *src, u64 lo, u64 hi, bool vec) {
  const int V = 16 / sizeof(S);
  u64 i = lo + (u64)threadIdx.x * (vec ? V : 1);
  if (vec) {
    for (; i + V <= hi; i += (u64)blockDim.x * V) {
      const uint4 *from = reinterpret_cast<const uint4 *>(src + i);
      *reinterpret_cast<uint4 *>(dst + i) = PEER ? fromPeer(from) : *from;
    }
    // the tail of fewer than V elements: thread 0
    if (threadIdx.x == 0)
      for (u64 j = lo + (hi - lo) / V * V; j < hi; j++) dst[j] = PEER ? fromPeer(src + j) : src[j];
    return;
  }
  for (; i < hi; i += blockDim.x) dst[i] = PEER ? fromPeer(src + i) : src[i];
}

// chunkOf sets [lo, hi): block b's chunk, of nb blocks, of n elements of
// S, a multiple of 16 bytes long.
template <class S>
DEV void chunkOf(u64 n, unsigned b, unsigned nb, u64 &lo, u64 &hi) {
  const int V = 16 / sizeof(S);
  u64 per = (n + nb - 1) / nb;
  per = (per + V - 1) / V * V;
  lo = (u64)b * per;
  hi = lo + per < n ? lo + per : n;
}

// ALLPEERS and NOPEER name, where the helpers below take one peer, every
// peer or none.
#define ALLPEERS 0xffffffffu
#define NOPEER 0xfffffffeu

// MEMBER is DEV for member functions (static would make them class-wide).
#define MEMBER __device__ __forceinline__

// Call is one launch's view of the regions (the kernels' parameters from
// seq on) and the block it runs: vb of nvb, the call's blocks, which are
// the grid's blocks when the call is launched (blockIdx.x of gridDim.x)
// and blocks a resident kernel's blocks take in turn when it serves the
// call (gorun_serve).
struct Call {
  const u64 *regions;
  unsigned nranks, rank;
  u64 seq, wset, need, slot, flags, timeout;
  unsigned *err;
  u64 *done;
  unsigned vb, nvb;

  MEMBER volatile u64 *words(unsigned r) const { return (volatile u64 *)((char *)regions[r] + flags); }
  MEMBER volatile u64 *data(unsigned r, unsigned src, unsigned set, unsigned b) const {
    return words(r) + ((u64)src * 2 + set) * ARPUSH_MAXB + b;
  }
  MEMBER volatile u64 *ack(unsigned r, unsigned src) const {
    return words(r) + (u64)nranks * 2 * ARPUSH_MAXB + src;
  }
  MEMBER volatile u64 *prog(unsigned b) const {
    return words(rank) + (u64)nranks * 2 * ARPUSH_MAXB + nranks + b;
  }
  MEMBER unsigned long long *fin() const {
    return (unsigned long long *)(words(rank) + (u64)nranks * 2 * ARPUSH_MAXB + nranks + ARPUSH_MAXB);
  }
  // slotOf is slot src of set (0 or 1) in this rank's region.
  MEMBER char *slotOf(unsigned set, unsigned src) const {
    return (char *)regions[rank] + ((u64)set * nranks + src) * slot;
  }
  // peerSlot is slot rank of this call's set in peer p's region.
  MEMBER char *peerSlot(unsigned p) const { return (char *)regions[p] + wset + (u64)rank * slot; }
};

// timedOut reports, for a wait that began at start, whether it has given
// up, and then sets *err.
DEV bool timedOut(const Call &c, u64 start) {
  if (globaltimer() - start <= c.timeout) return false;
  *(volatile unsigned *)c.err = 1;
  return true;
}

// PROG_FRESH, PROG_PUSHED, PROG_DONE: a block's progress in its call.
enum { PROG_FRESH, PROG_PUSHED, PROG_DONE };

// begin acknowledges the call in every peer's region (block 0) and returns
// this block's progress in it (an earlier launch of the same call may have
// got some way). Every thread of the block calls it.
DEV int begin(const Call &c) {
  __shared__ int st;
  const unsigned t = threadIdx.x;
  if (c.vb == 0 && t < c.nranks && t != c.rank) *c.ack(t, c.rank) = c.seq;
  if (t == 0) {
    const u64 p = *c.prog(c.vb);
    st = p == 4 * c.seq + 2 ? PROG_DONE : p == 4 * c.seq + 1 ? PROG_PUSHED : PROG_FRESH;
  }
  __syncthreads();
  return st;
}

// mark records this block's progress (after every thread's part of it).
DEV void mark(const Call &c, int st) {
  __syncthreads();
  if (threadIdx.x == 0) *c.prog(c.vb) = 4 * c.seq + st;
}

// finish marks this block done with its call and counts it in fin, after
// a GPU-scope fence; the block that completes the count (nvb blocks,
// over every launch of the call) sets fin back to 0 and the host's
// completion word *done to seq. Every block's stores to this GPU's memory
// (out) are then in its L2, where any later work of the GPU, its copies and
// its peers read them; the stores to the peers' regions were released
// before. No system-scope fence (1.7-1.8 us on 2 H100): where out is another GPU's
// memory (coll's device switch), the host synchronizes the stream instead.
// (One atomic add a block: a compare-and-swap loop here cost about 30 us
// a call at 128 blocks.)
DEV void finish(const Call &c) {
  mark(c, PROG_DONE);
  if (threadIdx.x != 0) return;
  // The barrier in mark ordered the block's stores before this thread's
  // fence (as cooperative groups' grid sync does it).
  fenceGpu();
  if (atomicAdd(c.fin(), 1ull) + 1 == c.nvb) {
    *(volatile u64 *)c.fin() = 0;
    *(volatile u64 *)c.done = c.seq;
  }
}

// cleared waits until every peer this block writes to (to: one, ALLPEERS
// or NOPEER) has acknowledged a call at or after c.need, so that nothing
// there still reads the set this call writes; false: timed out.
DEV bool cleared(const Call &c, unsigned to) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const unsigned t = threadIdx.x;
  if (t < c.nranks && t != c.rank && (to == ALLPEERS || to == t)) {
    volatile u64 *a = c.ack(c.rank, t);
    const u64 start = globaltimer();
    while (*a < c.need)
      if (timedOut(c, start)) {
        failed = 1;
        break;
      }
  }
  __syncthreads();
  return !failed;
}

// announce: after this block's stores into the peers' slots, set its data
// word to seq in the region of peer to (one, ALLPEERS or NOPEER), each
// with a release (the barrier, then a system-scope fence by the storing
// thread).
DEV void announce(const Call &c, unsigned to) {
  __syncthreads();
  const unsigned t = threadIdx.x;
  if (t < c.nranks && t != c.rank && (to == ALLPEERS || to == t)) {
    fenceSys();
    *c.data(t, c.rank, c.wset != 0, c.vb) = c.seq;
  }
}

// awaitData waits until peer from (one, ALLPEERS or NOPEER) has set this
// block's data word in this rank's region to seq, in either set, and
// records the set in set[from]; false: timed out.
DEV bool awaitData(const Call &c, unsigned from, unsigned char *set) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const unsigned t = threadIdx.x;
  if (t < c.nranks && t != c.rank && (from == ALLPEERS || from == t)) {
    volatile u64 *d0 = c.data(c.rank, t, 0, c.vb), *d1 = c.data(c.rank, t, 1, c.vb);
    const u64 start = globaltimer();
    for (;;) {
      if (*d0 == c.seq) {
        set[t] = 0;
        break;
      }
      if (*d1 == c.seq) {
        set[t] = 1;
        break;
      }
      if (timedOut(c, start)) {
        failed = 1;
        break;
      }
    }
  }
  __syncthreads();  // the block reads the peers' slots after this, with fromPeer
  return !failed;
}

// arpush is the body of the arpush, rspush and rdpush kernels for the
// call's block c.vb; set is ARPUSH_MAXR bytes of shared memory.
template <class T, int OP>
DEV void arpush(const Call &c, const typename T::S *in, typename T::S *out, u64 n, u64 stride,
                unsigned root, unsigned char *set) {
  typedef typename T::S S;
  const int V = 16 / sizeof(S);
  u64 lo, hi;
  chunkOf<S>(n, c.vb, c.nvb, lo, hi);
  const unsigned rank = c.rank, nranks = c.nranks;
  const bool vec = (((u64)in | (u64)out | c.slot | stride * sizeof(S)) & 15) == 0;
  // root == ALLPEERS: every rank folds (allreduce, reduce-scatter); else
  // only root does, and the others push to it alone (reduce).
  const bool folds = root == ALLPEERS || root == rank;
  const unsigned to = root == rank ? NOPEER : root;
  int st = begin(c);
  if (st == PROG_DONE) return;
  if (st == PROG_FRESH) {
    if (!cleared(c, to)) return;
    for (unsigned p = 0; p < nranks; p++) {
      if (p == rank || (root != ALLPEERS && p != root)) continue;
      if (lo < hi) copychunk<S>((S *)c.peerSlot(p), in + p * stride, lo, hi, vec);
    }
    announce(c, to);
    mark(c, PROG_PUSHED);
  }
  if (!folds) {
    finish(c);
    return;
  }
  if (!awaitData(c, ALLPEERS, set)) return;
  in += rank * stride;  // this rank's own contribution
  const unsigned t = threadIdx.x;
  u64 done = lo;
  if (vec && lo < hi) {
    // 16 bytes at a time; the chunk starts on a 16-byte boundary.
    const u64 vlo = lo / V, vhi = vlo + (hi - lo) / V;
    for (u64 i = vlo + t; i < vhi; i += blockDim.x) {
      uint4 acc = rank == 0 ? reinterpret_cast<const uint4 *>(in)[i]
                            : fromPeer(reinterpret_cast<const uint4 *>(c.slotOf(set[0], 0)) + i);
      for (unsigned r = 1; r < nranks; r++) {
        const uint4 x = r == rank ? reinterpret_cast<const uint4 *>(in)[i]
                                  : fromPeer(reinterpret_cast<const uint4 *>(c.slotOf(set[r], r)) + i);
        acc = vapply<T, OP>(acc, x);
      }
      reinterpret_cast<uint4 *>(out)[i] = acc;
    }
    done = vhi * V;
  }
  for (u64 i = done + t; i < hi; i += blockDim.x) {
    S acc = rank == 0 ? in[i] : fromPeer((const S *)c.slotOf(set[0], 0) + i);
    for (unsigned r = 1; r < nranks; r++) {
      const S x = r == rank ? in[i] : fromPeer((const S *)c.slotOf(set[r], r) + i);
      acc = apply<T, OP>(acc, x);
    }
    out[i] = acc;
  }
  finish(c);
}

// CALL_PARAMS are the kernels' parameters from seq on, and CALL the Call
// they make.
#define CALL_PARAMS \
  u64 seq, u64 wset, u64 need, u64 slot, u64 flags, u64 timeout, unsigned *err, u64 *done
#define CALL {regions, nranks, rank, seq, wset, need, slot, flags, timeout, err, done, blockIdx.x, gridDim.x}

#define ARPUSH(opname, OP, tname, T)                                                          \
  extern "C" __global__ void gorun_arpush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, unsigned nranks, unsigned rank,    \
      CALL_PARAMS) {                                                                           \
    const Call c = CALL;                                                                       \
    __shared__ unsigned char set[ARPUSH_MAXR];                                                 \
    arpush<T, OP>(c, in, out, n, 0, ALLPEERS, set);                                            \
  }                                                                                            \
  extern "C" __global__ void gorun_rspush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, u64 stride, unsigned nranks,       \
      unsigned rank, CALL_PARAMS) {                                                            \
    const Call c = CALL;                                                                       \
    __shared__ unsigned char set[ARPUSH_MAXR];                                                 \
    arpush<T, OP>(c, in, out, n, stride, ALLPEERS, set);                                       \
  }                                                                                            \
  extern "C" __global__ void gorun_rdpush_##opname##_##tname(                                \
      const u64 *regions, const T::S *in, T::S *out, u64 n, unsigned nranks, unsigned rank,    \
      unsigned root, CALL_PARAMS) {                                                            \
    const Call c = CALL;                                                                       \
    __shared__ unsigned char set[ARPUSH_MAXR];                                                 \
    arpush<T, OP>(c, in, out, n, 0, root, set);                                                \
  }

EACH_TYPE(ARPUSH)

// agpush is gorun_agpush's body for the call's block c.vb.
DEV void agpush(const Call &c, const unsigned char *in, unsigned char *out, u64 n, unsigned char *set) {
  typedef unsigned char S;
  const unsigned rank = c.rank, nranks = c.nranks;
  u64 lo, hi;
  chunkOf<S>(n, c.vb, c.nvb, lo, hi);
  const bool vec = (((u64)in | (u64)out | c.slot | n) & 15) == 0;
  int st = begin(c);
  if (st == PROG_DONE) return;
  if (st == PROG_FRESH) {
    if (!cleared(c, ALLPEERS)) return;
    for (unsigned p = 0; p < nranks && lo < hi; p++) {
      S *dst = p == rank ? out + (u64)rank * n : (S *)c.peerSlot(p);
      if (dst != in) copychunk<S>(dst, in, lo, hi, vec);
    }
    announce(c, ALLPEERS);
    mark(c, PROG_PUSHED);
  }
  if (!awaitData(c, ALLPEERS, set)) return;
  for (unsigned p = 0; p < nranks && lo < hi; p++) {
    if (p == rank) continue;
    // copychunk copies [lo, hi) of src to the same offsets of dst.
    copychunk<S, true>(out + (u64)p * n, (const S *)c.slotOf(set[p], p), lo, hi, vec);
  }
  finish(c);
}

extern "C" __global__ void gorun_agpush(const u64 *regions, const unsigned char *in,
                                        unsigned char *out, u64 n, unsigned nranks,
                                        unsigned rank, CALL_PARAMS) {
  const Call c = CALL;
  __shared__ unsigned char set[ARPUSH_MAXR];
  agpush(c, in, out, n, set);
}

// bcpush is gorun_bcpush's body for the call's block c.vb.
DEV void bcpush(const Call &c, unsigned char *buf, u64 n, unsigned root, unsigned char *set) {
  typedef unsigned char S;
  const unsigned rank = c.rank, nranks = c.nranks;
  u64 lo, hi;
  chunkOf<S>(n, c.vb, c.nvb, lo, hi);
  const bool vec = (((u64)buf | c.slot) & 15) == 0;
  int st = begin(c);
  if (st == PROG_DONE) return;
  if (rank == root) {
    if (!cleared(c, ALLPEERS)) return;
    for (unsigned p = 0; p < nranks && lo < hi; p++)
      if (p != rank) copychunk<S>((S *)c.peerSlot(p), buf, lo, hi, vec);
    announce(c, ALLPEERS);
    finish(c);
    return;
  }
  if (!awaitData(c, root, set)) return;
  if (lo < hi) copychunk<S, true>(buf, (const S *)c.slotOf(set[root], root), lo, hi, vec);
  finish(c);
}

extern "C" __global__ void gorun_bcpush(const u64 *regions, unsigned char *buf, u64 n,
                                        unsigned nranks, unsigned rank, unsigned root,
                                        CALL_PARAMS) {
  const Call c = CALL;
  __shared__ unsigned char set[ARPUSH_MAXR];
  bcpush(c, buf, n, root, set);
}

// gorun_serve: a resident kernel that runs push calls handed to it through
// mapped host memory, instead of one launch a call (gpu/serve.go): a
// launch costs the host 3.4-4.8 us and reaches the GPU and back in 8.3-9.7
// us, where a word the host stores is seen by a running kernel, and its
// answer by the host, within 3.3 us (coll/MEASUREMENTS.md, GPU
// collectives, "A resident kernel").
//
//   (volatile u64 *host, u64 *dev, u64 last, u64 idle_ns, u64 gen, u64 start_ns)
//
// host is a page of mapped host memory, u64 words: SV_SEQ, the number of
// the call the host hands over (it grows by one a call; the host stores
// the call's words at SV_BODY first, each as two halves tagged with the
// call's number: serveFetch); SV_ANS, which the kernel sets to that
// number once every block is done with the call; SV_EXITED, see below.
// The call's words (CMD_*) are a push kernel's parameters, the kernel
// (KIND_*, and the operation and type of the reductions: SV_OP_*, SV_T_*)
// and the number of the call's blocks, which the grid's blocks take in
// turn (block b runs the call's blocks b, b + gridDim.x, ...). dev is
// device memory: the number of the call handed to every block (SV_DSEQ),
// the count of blocks done with this launch's calls (SV_COUNT), the count
// of blocks started (SV_STARTED; the host zeroes both before each launch)
// and a copy of the call's words
// (SV_DBODY: one is enough, since the host hands a call over only once
// every block is done with the one before).
//
// The grid is as many blocks as the device holds at once (gpu/serve.go),
// at most 64 registers a thread (two blocks of 512 threads an SM); still
// some blocks may start late, while other kernels hold SMs. So block 0
// takes the next call, or starts counting its idle time, only once every
// block has counted itself done with the last one: a block that starts
// late finds that call, not the kernel's end. Where a block could never
// start (MPS limits on the SMs a process may use, a green context, another
// kernel that holds SMs for good) the calls would wait for it for good; so
// every block counts itself started first, and block 0, before the first
// call of a launch, waits start_ns at most for the whole grid: past that it
// stores SV_UNRESIDENT in SV_EXITED, without taking the call, and ends the
// launch (SV_QUIT | gen, which a block that starts later takes for its
// end); the host then launches its calls (gpu/serve.go).
//
// Warp 0 of block 0 alone polls host memory (every block polling it
// made a call take 50 us with 16 blocks instead of 3.3: the probe
// serve/gpus=1/blocks=16); it copies the call's words into device memory
// and publishes the call's number there, where the other blocks poll.
//
// gen numbers the launches: a kernel that ends publishes SV_QUIT | gen
// as the call's number in device memory, which the blocks of a later
// launch (waiting after the same last call) pass over.
//
// The kernel ends after idle_ns without a call, so that it holds no SMs
// and no stream while the program does other work, and at once on a call
// of kind KIND_QUIT (the host stops it before what would wait for every
// stream of the device: a free, a context's synchronization). Ending races with the
// host handing a call over; they settle it as in Dekker's algorithm:
// the kernel stores SV_EXITED = last (the number of the last call it ran),
// fences at system scope and reads SV_SEQ again; the host stores SV_SEQ
// (an XCHG: a full fence) and reads SV_EXITED. At least one sees the
// other: a kernel that sees the call takes it (and sets SV_EXITED back to
// SV_NONE); a host that sees SV_EXITED = its call's number - 1 waits for either
// the answer or the end of the stream's work, and launches the kernel
// again in the latter case.
enum { SV_SEQ = 0, SV_EXITED = 1, SV_ANS = 2, SV_BODY = 8 };
enum { SV_DSEQ = 0, SV_COUNT = 1, SV_STARTED = 2, SV_DBODY = 8 };
enum {
  CMD_KIND, CMD_OP, CMD_TYPE, CMD_TABLE, CMD_IN, CMD_OUT, CMD_N, CMD_STRIDE, CMD_NRANKS, CMD_RANK,
  CMD_ROOT, CMD_SEQ, CMD_WSET, CMD_NEED, CMD_SLOT, CMD_FLAGS, CMD_TIMEOUT, CMD_ERR, CMD_DONE,
  CMD_NVB, CMD_WORDS
};
enum { KIND_AR, KIND_RS, KIND_RD, KIND_AG, KIND_BC, KIND_QUIT };
enum { SV_T_f32, SV_T_f64, SV_T_f16, SV_T_bf16, SV_T_i32, SV_T_i64, SV_T_u8 };
#define SV_QUIT 0x8000000000000000ull
#define SV_NONE 0xffffffffffffffffull        // SV_EXITED: no end under way
#define SV_UNRESIDENT 0xfffffffffffffffeull  // SV_EXITED: the grid never all started

DEV u64 loadAcquireSys(const volatile u64 *p) {
  u64 v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// serveFetch (warp 0 of block 0) waits until every block has counted
// itself done with this launch's calls so far (counted of them; before
// the first, until every block has started, start_ns at most), then for
// the call after last, and copies its words into dev; it returns the
// call's number, or SV_QUIT | gen once the kernel is to end.
//
// The host writes each of the call's words as two (SV_BODY: its low and
// high halves, each in the low half of a u64 whose high half is the low 32
// bits of the call's number, as NCCL's LL protocol carries a flag with its
// data) before SV_SEQ: the warp polls the words themselves, 8 bytes a
// load, single-copy atomic, so that one read across PCIe brings the call
// and its words (polling SV_SEQ, then reading the words, took two).
DEV u64 serveFetch(volatile u64 *host, u64 *dev, u64 last, u64 idle, u64 gen, u64 counted, u64 startWait) {
  const unsigned lane = threadIdx.x;
  const unsigned full = 0xffffffffu;
  int unresident = 0;
  if (lane == 0) {
    if (counted == 0) {
      const u64 t0 = globaltimer();
      while (*(volatile u64 *)(dev + SV_STARTED) < gridDim.x)
        if (globaltimer() - t0 > startWait) {
          unresident = 1;
          break;
        }
    }
    while (!unresident && *(volatile u64 *)(dev + SV_COUNT) < counted) {
    }
  }
  if (__shfl_sync(full, unresident, 0)) {
    if (lane == 0) {
      host[SV_EXITED] = SV_UNRESIDENT;
      asm volatile("fence.sc.sys;" ::: "memory");
      *(volatile u64 *)(dev + SV_DSEQ) = SV_QUIT | gen;
    }
    return SV_QUIT | gen;
  }
  __syncwarp();
  const unsigned tag = (unsigned)(last + 1);
  const unsigned extra = 2 * CMD_WORDS - 32;  // halves past the warp's first 32
  u64 start = globaltimer();
  u64 c = last + 1, a, b;
  for (;;) {
    a = host[SV_BODY + lane];
    b = lane < extra ? host[SV_BODY + 32 + lane] : (u64)tag << 32;
    if (__all_sync(full, (unsigned)(a >> 32) == tag && (unsigned)(b >> 32) == tag)) break;
    int quit = 0;
    if (lane == 0 && globaltimer() - start > idle) {
      host[SV_EXITED] = last;
      asm volatile("fence.sc.sys;" ::: "memory");
      if (loadAcquireSys(host + SV_SEQ) == last) {
        quit = 1;
      } else {
        // The call is there (its words were written before SV_SEQ).
        host[SV_EXITED] = SV_NONE;
        start = globaltimer();
      }
    }
    if (__shfl_sync(full, quit, 0)) {
      c = SV_QUIT | gen;
      break;
    }
  }
  // Word i's halves are half 2i and 2i+1: lane l's a holds half l, its b
  // half 32+l.
  const unsigned lo = (2 * lane) & 31, hi = (2 * lane + 1) & 31;
  const u64 alo = __shfl_sync(full, a, lo), blo = __shfl_sync(full, b, lo);
  const u64 ahi = __shfl_sync(full, a, hi), bhi = __shfl_sync(full, b, hi);
  const u64 word = ((2 * lane < 32 ? alo : blo) & 0xffffffffull) | ((2 * lane + 1 < 32 ? ahi : bhi) << 32);
  if (!(c & SV_QUIT) && lane < CMD_WORDS) dev[SV_DBODY + lane] = word;
  __syncwarp();
  if (lane == 0) {
    if (!(c & SV_QUIT) && word == KIND_QUIT) c = SV_QUIT | gen;  // lane 0's word is the kind
    __threadfence();
    *(volatile u64 *)(dev + SV_DSEQ) = c;
  }
  return __shfl_sync(full, c, 0);
}

template <class T, int OP>
DEV void serveReduce(const Call &c, const u64 *w, unsigned char *set) {
  typedef typename T::S S;
  const unsigned root = w[CMD_KIND] == KIND_RD ? (unsigned)w[CMD_ROOT] : ALLPEERS;
  arpush<T, OP>(c, (const S *)w[CMD_IN], (S *)w[CMD_OUT], w[CMD_N], w[CMD_KIND] == KIND_RS ? w[CMD_STRIDE] : 0,
                root, set);
}

#define SERVE_CASE(opname, OP, tname, T) \
  case SV_T_##tname * 4 + OP:            \
    serveReduce<T, OP>(c, w, set);       \
    return;

// serveBlock runs the call's block c.vb.
DEV void serveBlock(const Call &c, const u64 *w, unsigned char *set) {
  switch (w[CMD_KIND]) {
    case KIND_AG:
      agpush(c, (const unsigned char *)w[CMD_IN], (unsigned char *)w[CMD_OUT], w[CMD_N], set);
      return;
    case KIND_BC:
      bcpush(c, (unsigned char *)w[CMD_OUT], w[CMD_N], (unsigned)w[CMD_ROOT], set);
      return;
  }
  switch (w[CMD_TYPE] * 4 + w[CMD_OP]) { EACH_TYPE(SERVE_CASE) }
}

extern "C" __global__ void __launch_bounds__(512, 2)
    gorun_serve(volatile u64 *host, u64 *dev, u64 last, u64 idle, u64 gen, u64 startWait) {
  __shared__ u64 w[CMD_WORDS];
  __shared__ u64 cur;
  __shared__ int stop;
  __shared__ unsigned char set[ARPUSH_MAXR];
  const unsigned t = threadIdx.x;
  u64 calls = 0;  // this launch's, so far
  if (t == 0) atomicAdd((unsigned long long *)(dev + SV_STARTED), 1ull);
  for (;;) {
    if (blockIdx.x == 0) {
      if (t < 32) {
        const u64 c = serveFetch(host, dev, last, idle, gen, calls * gridDim.x, startWait);
        if (t == 0) cur = c;
      }
    } else if (t == 0) {
      // the next call, or this launch's end (an earlier launch's is
      // passed over)
      u64 c;
      while ((c = *(volatile u64 *)(dev + SV_DSEQ)) == last || ((c & SV_QUIT) && c != (SV_QUIT | gen))) {
      }
      __threadfence();  // the acquire: the call's words after its number
      cur = c;
    }
    __syncthreads();
    const u64 seq = cur;
    if (seq & SV_QUIT) return;
    if (t < CMD_WORDS) w[t] = __ldcg(dev + SV_DBODY + t);
    __syncthreads();
    Call c = {(const u64 *)w[CMD_TABLE], (unsigned)w[CMD_NRANKS], (unsigned)w[CMD_RANK], w[CMD_SEQ], w[CMD_WSET],
              w[CMD_NEED], w[CMD_SLOT], w[CMD_FLAGS], w[CMD_TIMEOUT], (unsigned *)w[CMD_ERR], (u64 *)w[CMD_DONE],
              0, (unsigned)w[CMD_NVB]};
    for (unsigned vb = blockIdx.x; vb < c.nvb; vb += gridDim.x) {
      if (vb != blockIdx.x) {
        // an earlier block of this call that this one ran gave up
        // waiting: so would the rest (the host hands the call over again)
        if (t == 0) stop = *(volatile unsigned *)c.err != 0;
        __syncthreads();
        if (stop) break;
      }
      c.vb = vb;
      serveBlock(c, w, set);
    }
    __syncthreads();
    if (t == 0) {
      __threadfence();
      if ((atomicAdd((unsigned long long *)(dev + SV_COUNT), 1ull) + 1) % gridDim.x == 0) host[SV_ANS] = seq;
    }
    last = seq;
    calls++;
  }
}
