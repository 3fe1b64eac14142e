// Bcast is the OSU collective latency method applied to mpi.Bcast (root
// 0), as tests/openmpi/osu_bcast.c does it for Open MPI: SIZE bytes; for
// each size a barrier, then every call timed alone and followed by an
// untimed barrier; the figure is the per-rank average over the timed
// calls, in microseconds, the maximum over ranks. Sizes 1 B..1 MiB; 1000
// iterations + 200 warm-up up to 8 KiB, 100 + 10 above.
package main

import (
	"log"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("bcast", 1, 1<<20, 1000, 200, 100, 10, 8192)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Rank() == 0 {
		osu.CollHeader(o, "Broadcast Latency Test", true)
	}
	if o.Device {
		b := o.Buffer(o.Max)
		osu.RunCollective(w, o, func(size int) error { return mpi.BcastGPU(w, b.Dev(size), 0) })
		return
	}
	buf := make([]byte, o.Max)
	for i := range buf {
		buf[i] = 'a'
	}
	osu.RunCollective(w, o, func(size int) error { return mpi.Bcast(w, buf[:size], 0) })
}
