// Package kernels holds gorun's own CUDA kernels: their CUDA C source
// (reduce.cu) and the PTX compiled from it, embedded in every binary and
// JIT-compiled by the driver for whatever GPU it meets.
//
// The PTX is generated, not written: after editing reduce.cu, regenerate it
// on a machine with nvcc (the lent GPU host has one), from the repository
// root:
//
//	nvcc -ptx -arch=compute_80 -O3 -o gpu/kernels/reduce.ptx gpu/kernels/reduce.cu
//
// and commit both files. docs/gpu.md describes the round trip through the
// device tool. This package only names things; package gpu loads and
// launches them.
package kernels

import (
	"bytes"
	_ "embed"
	"regexp"
)

//go:generate nvcc -ptx -arch=compute_80 -O3 -o reduce.ptx reduce.cu

// ReducePTX is the PTX of reduce.cu (target compute_80).
//
//go:embed reduce.ptx
var ReducePTX []byte

// ReduceOps are the operation names of the reduce kernels, in kernel-name
// form.
var ReduceOps = []string{"sum", "prod", "min", "max"}

// ReduceTypes are the element type names of the reduce kernels, in
// kernel-name form: float32, float64, float16, bfloat16, int32, int64, uint8.
var ReduceTypes = []string{"f32", "f64", "f16", "bf16", "i32", "i64", "u8"}

// ReduceName returns the name of the kernel that reduces elements of type
// typ (one of ReduceTypes) with op (one of ReduceOps). Its parameters are
// (T *dst, const T *a, const T *b, unsigned long long n).
func ReduceName(op, typ string) string { return "gorun_reduce_" + op + "_" + typ }

// Launch shape of the reduce kernels, as reduce.cu assumes it.
const (
	// ReduceVectorBytes is the width of one load or store on the vector path,
	// taken when dst, a and b are all aligned to it.
	ReduceVectorBytes = 16
	// ReduceUnroll is how many vector loads each thread keeps in flight.
	ReduceUnroll = 4
)

// AllreducePushName returns the name of the one-kernel allreduce over IPC
// regions (reduce.cu, gorun_arpush_*) for elements of type typ with op.
// Its parameters are (const u64 *regions, const T *in, T *out, u64 n,
// unsigned nranks, unsigned rank, u64 seq, u64 wset, u64 need, u64 slot,
// u64 flags, u64 timeout_ns, unsigned *err, u64 *done).
func AllreducePushName(op, typ string) string { return "gorun_arpush_" + op + "_" + typ }

// ReduceScatterPushName returns the name of the one-kernel reduce-scatter
// of equal blocks over IPC regions (gorun_rspush_*): AllreducePushName's
// parameters with u64 stride (the block length in elements) after n.
func ReduceScatterPushName(op, typ string) string { return "gorun_rspush_" + op + "_" + typ }

// ReducePushName returns the name of the one-kernel reduce to one rank
// over IPC regions (gorun_rdpush_*): AllreducePushName's parameters with
// unsigned root after rank.
func ReducePushName(op, typ string) string { return "gorun_rdpush_" + op + "_" + typ }

// BcastPushName is the one-kernel broadcast over IPC regions, of any
// element type. Its parameters are (const u64 *regions, u8 *buf, u64 n
// (bytes), unsigned nranks, unsigned rank, unsigned root, u64 seq, u64 wset,
// u64 need, u64 slot, u64 flags, u64 timeout_ns, unsigned *err, u64 *done).
const BcastPushName = "gorun_bcpush"

// AllgatherPushName is the one-kernel allgather over IPC regions, of any
// element type: AllreducePushName's parameters, with n in bytes.
const AllgatherPushName = "gorun_agpush"

// ServeName is the resident kernel that runs push calls handed to it
// through mapped host memory (reduce.cu, gorun_serve; package gpu's
// Server): (u64 *host, u64 *dev, u64 last, u64 idle_ns, u64 gen,
// u64 start_ns).
const ServeName = "gorun_serve"

// ServeCurrent reports whether a PTX image's resident kernel takes the
// parameters named above. One from before start_ns never gives up a
// launch whose grid does not all start (its calls would wait for the
// missing blocks for good); package gpu treats it as absent, and the push
// calls launch their kernels.
func ServeCurrent(ptx []byte) bool {
	return bytes.Contains(ptx, []byte(ServeName+"_param_5"))
}

// AllreducePushMaxBlocks is the most blocks a push kernel runs with: its
// words hold two data words per rank and one progress word per block.
const AllreducePushMaxBlocks = 128

// PushMaxRanks is the most ranks the push kernels serve (reduce.cu,
// ARPUSH_MAXR): one thread of a block per peer.
const PushMaxRanks = 512

// PushCurrent reports whether a PTX image's push kernels take the
// parameters named above (with done: the host polls for completion). A
// PTX from before them has the same kernel names and fewer parameters, and
// launching it with these would read garbage; package gpu treats its push
// kernels as absent.
func PushCurrent(ptx []byte) bool {
	return bytes.Contains(ptx, []byte(BcastPushName+"_param_13"))
}

var entryRE = regexp.MustCompile(`(?m)^\s*\.(?:visible\s+)?\.entry\s+([A-Za-z_][A-Za-z0-9_$]*)`)

// Entries lists the kernel names defined in a PTX image.
func Entries(ptx []byte) []string {
	var names []string
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		names = append(names, string(m[1]))
	}
	return names
}
