// Allreduce is the OSU collective latency method applied to mpi.Allreduce,
// as tests/openmpi/osu_allreduce.c does it for Open MPI: SIZE bytes of
// float32 (count SIZE/4) summed over the world; for each size a barrier,
// then every call timed alone and followed by an untimed barrier; the
// figure is the per-rank average over the timed calls, in microseconds,
// the maximum over ranks. Sizes 4 B..1 MiB (a smaller -m MIN is raised to
// 4); 1000 iterations + 200 warm-up up to 8 KiB, 100 + 10 above.
package main

import (
	"log"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("allreduce", 4, 1<<20, 1000, 200, 100, 10, 8192)
	o.Min = max(o.Min, 4)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Rank() == 0 {
		osu.CollHeader(o, "Allreduce Latency Test", true)
	}
	if o.Device {
		s, r := o.Buffer(o.Max), o.Buffer(o.Max)
		osu.RunCollective(w, o, func(size int) error {
			return mpi.AllreduceGPU(w, s.Float32(size), r.Float32(size), mpi.Sum)
		})
		return
	}
	send, recv := osu.Float32s(o.Max)
	osu.RunCollective(w, o, func(size int) error {
		return mpi.Allreduce(w, send[:size/4], recv[:size/4], mpi.Sum)
	})
}
