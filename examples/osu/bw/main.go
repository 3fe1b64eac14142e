// Bw is the OSU bandwidth benchmark's method in Go: rank 0 posts a window
// of Isends, rank 1 a window of Irecvs, then rank 1 answers with a 4-byte
// ack; MB/s = bytes moved / time / 10^6.
package main

import (
	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("bw", 1, 4<<20, 100, 10, 20, 2, 8192)
	w := osu.InitPair("bw")
	defer mpi.Finalize()
	me := w.Rank()
	if me == 0 {
		osu.Header("Bandwidth Test", "Bandwidth (MB/s)")
	}
	buf := o.Buffer(o.Max)
	ack := make([]byte, 4)
	reqs := make([]*mpi.Request, o.Window)
	for _, size := range o.Sizes() {
		iters, warm := o.Counts(size)
		b := buf.Slice(size)
		mpi.Barrier(w)
		var t0 float64
		if me < 2 {
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				var err error
				for k := range reqs {
					if me == 0 {
						reqs[k], err = osu.Isend(w, b, 1, 100)
					} else {
						reqs[k], err = osu.Irecv(w, b, 0, 100)
					}
					osu.Must(err)
				}
				err = mpi.WaitallFree(reqs) // MPI_STATUSES_IGNORE; the requests reused, as MPI_Waitall frees the C twin's
				osu.Must(err)
				if me == 0 {
					_, err = mpi.Recv(w, ack, 1, 101)
				} else {
					err = mpi.Send(w, ack, 0, 101)
				}
				osu.Must(err)
			}
		}
		if me == 0 {
			el := mpi.Wtime() - t0
			osu.Line(size, float64(size)*float64(o.Window)*float64(iters)/el/1e6)
		}
	}
}
