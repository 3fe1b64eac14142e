// Alltoall is the OSU collective latency method applied to mpi.Alltoall,
// as tests/openmpi/osu_alltoall.c does it for Open MPI: SIZE bytes from
// every rank to every rank, itself included; for each size a barrier, then
// every call timed alone and followed by an untimed barrier; the figure is
// the per-rank average over the timed calls, in microseconds, the maximum
// over ranks. Sizes 1 B..1 MiB; 1000 iterations + 200 warm-up up to 8 KiB,
// 100 + 10 above.
package main

import (
	"log"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("alltoall", 1, 1<<20, 1000, 200, 100, 10, 8192)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	n := w.Size()
	send := make([]byte, o.Max*n)
	recv := make([]byte, o.Max*n)
	for i := range send {
		send[i], recv[i] = 'a', 'b'
	}
	if w.Rank() == 0 {
		osu.CollHeader(o, "All-to-All Personalized Exchange Latency Test", true)
	}
	osu.RunCollective(w, o, func(size int) error { return mpi.Alltoall(w, send[:size*n], recv[:size*n]) })
}
