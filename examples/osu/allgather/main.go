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
	send := make([]byte, o.Max)
	recv := make([]byte, o.Max*n)
	for i := range send {
		send[i] = 'a'
	}
	for i := range recv {
		recv[i] = 'b'
	}
	if w.Rank() == 0 {
		osu.Header("Allgather Latency Test", "Avg Latency(us)")
	}
	run(w, o, func(size int) error { return mpi.Allgather(w, send[:size], recv[:size*n]) })
}

// run is osu_coll_run of tests/openmpi/osu_common.h.
func run(w *mpi.Comm, o *osu.Options, op func(size int) error) {
	for _, size := range o.Sizes() {
		if size < o.Min {
			continue
		}
		iters, warm := o.Counts(size)
		must(mpi.Barrier(w))
		timer := 0.0
		for i := 0; i < iters+warm; i++ {
			t0 := mpi.Wtime()
			must(op(size))
			t1 := mpi.Wtime()
			if i >= warm {
				timer += t1 - t0
			}
			must(mpi.Barrier(w))
		}
		avg := []float64{timer * 1e6 / float64(iters)}
		maxv := []float64{0}
		must(mpi.Reduce(w, avg, maxv, mpi.Max, 0))
		if w.Rank() == 0 {
			osu.Line(size, maxv[0])
		}
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
