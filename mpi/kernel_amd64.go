package mpi

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Sum kernels in AVX2 assembly (kernel_amd64.s): dst[i] += src[i] for n
// elements. Go compiles the generic loop to scalar SSE, 6.4 GB/s for
// float32 on this project's machines (BenchmarkSumKernel); a reduction of
// 1 MiB then costs more than moving it over shared memory. The vector
// loops reach the cache's bandwidth. Floating-point sums are the same
// IEEE additions in the same pairing, so results do not change.

//go:noescape
func addF32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addF64AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addI32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addI64AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func add3F32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func add3F64AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func add3I32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func add3I64AVX2(dst, a, b unsafe.Pointer, n int)

var hasAVX2 = cpu.X86.HasAVX2

// fastSum returns the vector Sum kernels (inout += in, and out = in +
// inout) for elements of size bytes that are floats (float) or integers,
// or nils.
func fastSum(size int, float bool) (f2 func(in, inout []byte), f3 func(in, inout, out []byte)) {
	if !hasAVX2 {
		return nil, nil
	}
	var add func(dst, src unsafe.Pointer, n int)
	var add3 func(dst, a, b unsafe.Pointer, n int)
	switch {
	case float && size == 4:
		add, add3 = addF32AVX2, add3F32AVX2
	case float && size == 8:
		add, add3 = addF64AVX2, add3F64AVX2
	case !float && size == 4:
		add, add3 = addI32AVX2, add3I32AVX2
	case !float && size == 8:
		add, add3 = addI64AVX2, add3I64AVX2
	default:
		return nil, nil
	}
	f2 = func(in, inout []byte) {
		n := min(len(in), len(inout)) / size
		if n > 0 {
			add(unsafe.Pointer(unsafe.SliceData(inout)), unsafe.Pointer(unsafe.SliceData(in)), n)
		}
	}
	f3 = func(in, inout, out []byte) {
		n := min(len(in), len(inout), len(out)) / size
		if n > 0 {
			add3(unsafe.Pointer(unsafe.SliceData(out)), unsafe.Pointer(unsafe.SliceData(in)), unsafe.Pointer(unsafe.SliceData(inout)), n)
		}
	}
	return f2, f3
}
