// Allgather is the OSU collective latency method applied to
// mpi.Allgather, as tests/openmpi/osu_allgather.c does it for Open MPI:
// SIZE bytes from every rank to every rank; for each size a barrier, then
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
	o := osu.Parse("allgather", 1, 1<<20, 1000, 200, 100, 10, 8192)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	n := w.Size()
	if w.Rank() == 0 {
		osu.CollHeader(o, "Allgather Latency Test", true)
	}
	if o.Device {
		s, r := o.Buffer(o.Max), o.Buffer(o.Max*n)
		osu.RunCollective(w, o, func(size int) error { return mpi.AllgatherGPU(w, s.Dev(size), r.Dev(size*n)) })
		return
	}
	send := make([]byte, o.Max)
	recv := make([]byte, o.Max*n)
	for i := range send {
		send[i] = 'a'
	}
	for i := range recv {
		recv[i] = 'b'
	}
	osu.RunCollective(w, o, func(size int) error { return mpi.Allgather(w, send[:size], recv[:size*n]) })
}
