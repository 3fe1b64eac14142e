// Barrier is the OSU barrier latency method, as
// tests/openmpi/osu_barrier.c does it for Open MPI: back-to-back
// mpi.Barrier calls, each timed; the figure is the per-rank average, in
// microseconds, the maximum over ranks, printed as OSU prints it: one
// figure, no size column (-f: mean, minimum, maximum, iterations).
// 1000 iterations + 200 warm-up; -m is accepted and ignored.
package main

import (
	"log"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("barrier", 0, 0, 1000, 200, 1000, 200, 8192)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Rank() == 0 {
		osu.CollHeader(o, "Barrier Latency Test", false)
	}
	iters, warm := o.Counts(0)
	osu.Must(mpi.Barrier(w))
	timer := 0.0
	for i := 0; i < iters+warm; i++ {
		t0 := mpi.Wtime()
		osu.Must(mpi.Barrier(w))
		t1 := mpi.Wtime()
		if i >= warm {
			timer += t1 - t0
		}
	}
	osu.CollStats(w, o, 0, false, timer*1e6/float64(iters), iters)
}
