package mpi

import (
	"math"
	"testing"

	"github.com/gorun/gorun/coll"
)

// TestKernels checks every predefined kernel against its scalar
// definition on lengths that cross the vector loops' boundaries, for the
// vector Sum kernels especially.
func TestKernels(t *testing.T) {
	for _, n := range []int{0, 1, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 1000} {
		checkSum(t, n, func(i int) float32 { return float32(i)*0.37 - 5 })
		checkSum(t, n, func(i int) float64 { return float64(i)*1e-3 + math.Pi })
		checkSum(t, n, func(i int) int32 { return int32(i*7919) ^ 0x5a5a })
		checkSum(t, n, func(i int) int64 { return int64(i) << 33 })
		checkSum(t, n, func(i int) uint32 { return uint32(i * 40503) })
		checkSum(t, n, func(i int) int { return -i })
		checkSum(t, n, func(i int) int16 { return int16(i * 3) })
	}
}

func checkSum[T int | int16 | int32 | int64 | uint32 | float32 | float64](t *testing.T, n int, mk func(int) T) {
	t.Helper()
	o, err := bind[T]("test", Sum)
	if err != nil {
		t.Fatal(err)
	}
	// Misalign the start by one element to exercise unaligned loads.
	in, io := make([]T, n+1)[1:], make([]T, n+1)[1:]
	want := make([]T, n)
	for i := range n {
		in[i], io[i] = mk(i), mk(3*i+1)
		want[i] = in[i] + io[i]
	}
	keep := append([]T(nil), io...)
	// Three operands: into a third buffer, into in, into inout.
	if o3, ok := o.(coll.Op3); ok {
		for k := range 3 {
			a, b := append([]T(nil), in...), append([]T(nil), keep...)
			out := [][]T{make([]T, n), a, b}[k]
			o3.Apply3(elemBytes(a), elemBytes(b), elemBytes(out))
			for i := range n {
				if out[i] != want[i] {
					t.Fatalf("%T Apply3 (case %d), n=%d: element %d = %v, want %v", out[i], k, n, i, out[i], want[i])
				}
			}
		}
	}
	o.Apply(elemBytes(in), elemBytes(io))
	for i := range n {
		if io[i] != want[i] {
			t.Fatalf("%T sum, n=%d: element %d = %v, want %v", io[i], n, i, io[i], want[i])
		}
	}
}

// TestBindAllocsNothing: finding a predefined operation's kernel allocates
// nothing once bound, also when two types of one kind (int32 and a named
// int32) take turns in bind's first-level cache.
func TestBindAllocsNothing(t *testing.T) {
	type celsius int32
	for _, err := range []error{second(bind[int32]("test", Sum)), second(bind[celsius]("test", Sum))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		bind[int32]("test", Sum)
		bind[celsius]("test", Sum)
	}); n != 0 {
		t.Errorf("bind of int32 and a named int32 in turn: %v allocations a round, want 0", n)
	}
}

func second[A, B any](_ A, b B) B { return b }
