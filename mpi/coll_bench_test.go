package mpi

import (
	"testing"
)

// BenchmarkAllreduceSelf measures the per-call cost of the collective
// layer alone: an Allreduce on MPI_COMM_SELF moves no data.
func BenchmarkAllreduceSelf(b *testing.B) {
	if !Initialized() {
		if err := Init(); err != nil {
			b.Fatal(err)
		}
	}
	x, y := []float32{1, 2}, []float32{0, 0}
	s := Self()
	b.ReportAllocs()
	for b.Loop() {
		if err := Allreduce(s, x, y, Sum); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSumKernel measures the Sum kernel on 1 MiB of float32.
func BenchmarkSumKernel(b *testing.B) {
	o, err := bind[float32]("bench", Sum)
	if err != nil {
		b.Fatal(err)
	}
	in, io := make([]float32, 1<<18), make([]float32, 1<<18)
	bi, bo := elemBytes(in), elemBytes(io)
	b.SetBytes(int64(len(bi)))
	for b.Loop() {
		o.Apply(bi, bo)
	}
}
