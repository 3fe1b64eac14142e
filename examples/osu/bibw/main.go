// Bibw is the OSU bidirectional bandwidth benchmark's method in Go: ranks 0
// and 1 each post a window of Irecvs and a window of Isends every
// iteration; MB/s counts the bytes of both directions.
package main

import (
	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("bibw", 1, 4<<20, 100, 10, 20, 2, 8192)
	w := osu.InitPair("bibw")
	defer mpi.Finalize()
	me := w.Rank()
	if me == 0 {
		osu.Header("Bi-Directional Bandwidth Test", "Bandwidth (MB/s)")
	}
	sbuf := o.Buffer(o.Max)
	rbuf := o.Buffer(o.Max)
	reqs := make([]*mpi.Request, 2*o.Window)
	for _, size := range o.Sizes() {
		iters, warm := o.Counts(size)
		mpi.Barrier(w)
		var t0 float64
		if me < 2 {
			peer := 1 - me
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				var err error
				for k := 0; k < o.Window; k++ {
					reqs[k], err = osu.Irecv(w, rbuf.Slice(size), peer, 10)
					osu.Must(err)
				}
				for k := 0; k < o.Window; k++ {
					reqs[o.Window+k], err = osu.Isend(w, sbuf.Slice(size), peer, 10)
					osu.Must(err)
				}
				err = mpi.WaitallFree(reqs) // MPI_STATUSES_IGNORE; the requests reused, as MPI_Waitall frees the C twin's
				osu.Must(err)
			}
		}
		if me == 0 {
			el := mpi.Wtime() - t0
			osu.Line(size, 2*float64(size)*float64(o.Window)*float64(iters)/el/1e6)
		}
	}
}
