// Latency is the OSU latency benchmark's method in Go: ranks 0 and 1 (and
// further pairs 2-3, 4-5... at once, like osu_multi_lat) ping-pong a
// message; the figure is half the round trip, averaged, in microseconds.
package main

import (
	"github.com/gorun/gorun/examples/osu/internal/osu"
	"github.com/gorun/gorun/mpi"
)

func main() {
	o := osu.Parse("latency", 0, 4<<20, 10000, 1000, 1000, 100, 8192)
	w := osu.InitPair("latency")
	defer mpi.Finalize()
	me, n := w.Rank(), w.Size()
	pairs := n / 2
	active := me < 2*pairs
	peer := me ^ 1
	if me == 0 {
		osu.Header("Latency Test", "Latency (us)")
	}
	buf := o.Buffer(o.Max)
	for _, size := range o.Sizes() {
		iters, warm := o.Counts(size)
		b := buf.Slice(size)
		mpi.Barrier(w)
		var t0 float64
		if active {
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				if me%2 == 0 {
					osu.Must(osu.Send(w, b, peer, 1))
					osu.Must(osu.Recv(w, b, peer, 1))
				} else {
					osu.Must(osu.Recv(w, b, peer, 1))
					osu.Must(osu.Send(w, b, peer, 1))
				}
			}
		}
		lat := []float64{0}
		if active && me%2 == 0 {
			lat[0] = (mpi.Wtime() - t0) * 1e6 / float64(2*iters)
		}
		sum := []float64{0}
		osu.Must(mpi.Reduce(w, lat, sum, mpi.Sum, 0))
		if me == 0 {
			osu.Line(size, sum[0]/float64(pairs))
		}
	}
}
