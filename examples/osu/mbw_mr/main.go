// Mbw_mr is the OSU multiple bandwidth / message rate benchmark's method
// (osu_mbw_mr) in Go: the ranks pair up, rank i of the first half with
// rank i+n/2 of the second (an odd last rank only joins the barriers), and
// every pair runs at once. Per iteration the sender posts a window of
// Isends (-W, 64 by default) from one buffer, the receiver as many Irecvs
// into one buffer, both Waitall, then the receiver sends a 4-byte ack.
// Each sender times its timed iterations; rank 0 prints, per size, the
// sum over pairs of MB/s (bytes / time / 10^6) and of messages per second.
// tests/openmpi/osu_mbw_mr.c is its Open MPI twin.
package main

import (
	"fmt"

	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("mbw_mr", 1, 4<<20, 100, 10, 20, 2, 8192)
	w := osu.InitPair("mbw_mr")
	defer mpi.Finalize()
	me, n := w.Rank(), w.Size()
	pairs := n / 2
	sender := me < pairs
	active := me < 2*pairs
	peer := me + pairs
	if !sender {
		peer = me - pairs
	}
	if me == 0 {
		fmt.Printf("# OSU MPI Multiple Bandwidth / Message Rate Test v%s\n", osu.Version)
		fmt.Printf("# [ pairs: %d ] [ window size: %d ]\n", pairs, o.Window)
		fmt.Printf("%-10s%18s%18s\n", "# Size", "MB/s", "Messages/s")
	}
	buf := o.Buffer(o.Max)
	ack := make([]byte, 4)
	reqs := make([]*mpi.Request, o.Window)
	for _, size := range o.Sizes() {
		iters, warm := o.Counts(size)
		b := buf.Slice(size)
		osu.Must(mpi.Barrier(w))
		rate := []float64{0, 0} // this sender's MB/s and messages/s
		if active {
			var t0 float64
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				var err error
				for k := range reqs {
					if sender {
						reqs[k], err = osu.Isend(w, b, peer, 100)
					} else {
						reqs[k], err = osu.Irecv(w, b, peer, 100)
					}
					osu.Must(err)
				}
				err = mpi.WaitallFree(reqs) // MPI_STATUSES_IGNORE; the requests reused, as MPI_Waitall frees the C twin's
				osu.Must(err)
				if sender {
					_, err = mpi.Recv(w, ack, peer, 101)
				} else {
					err = mpi.Send(w, ack, peer, 101)
				}
				osu.Must(err)
			}
			if sender {
				el := mpi.Wtime() - t0
				msgs := float64(o.Window) * float64(iters)
				rate[0] = float64(size) * msgs / el / 1e6
				rate[1] = msgs / el
			}
		}
		sum := []float64{0, 0}
		osu.Must(mpi.Reduce(w, rate, sum, mpi.Sum, 0))
		if me == 0 {
			fmt.Printf("%-10d%18.2f%18.2f\n", size, sum[0], sum[1])
		}
	}
}
