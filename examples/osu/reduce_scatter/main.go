// Reduce_scatter is the OSU collective latency method applied to
// mpi.ReduceScatterBlock, as OSU's osu_reduce_scatter does it: SIZE bytes
// of float32 in all (count SIZE/4 split evenly over the ranks) summed over
// the world, each rank keeping its block; for each size a barrier, then
// every call timed alone and followed by an untimed barrier; the figure is
// the per-rank average over the timed calls, in microseconds, the maximum
// over ranks. Sizes 4 B..1 MiB, whole float32 blocks per rank (smaller
// sizes are raised to one element per rank); 1000 iterations + 200 warm-up
// up to 8 KiB, 100 + 10 above.
package main

import (
	"log"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("reduce_scatter", 4, 1<<20, 1000, 200, 100, 10, 8192)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	n := w.Size()
	o.Min = max(o.Min, 4*n)
	if w.Rank() == 0 {
		osu.CollHeader(o, "Reduce_scatter Latency Test", true)
	}
	// block is the bytes each rank keeps of a SIZE-byte input.
	block := func(size int) int { return size / 4 / n * 4 }
	if o.Device {
		s, r := o.Buffer(o.Max), o.Buffer(o.Max)
		osu.RunCollective(w, o, func(size int) error {
			k := block(size)
			return mpi.ReduceScatterBlockGPU(w, s.Float32(k*n), r.Float32(k), mpi.Sum)
		})
		return
	}
	send, recv := osu.Float32s(o.Max)
	osu.RunCollective(w, o, func(size int) error {
		k := block(size) / 4
		return mpi.ReduceScatterBlock(w, send[:k*n], recv[:k], mpi.Sum)
	})
}
