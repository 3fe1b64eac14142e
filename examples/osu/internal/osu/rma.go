package osu

import (
	"log"

	"github.com/gorun/gorun/mpi"
)

// RMALatency is the one-sided latency method of tests/openmpi/osu_rma.h
// (osu_put_latency's default): every rank allocates a window of the
// largest size; rank 0 locks rank 1's part (shared) and times Put (or Get)
// of each size, each followed by Flush; the figure is the time per
// operation and flush in microseconds.
func RMALatency(name string, get bool) {
	o := Parse(name, 1, 4<<20, 10000, 1000, 1000, 100, 8192)
	if o.Device {
		fail(name, "-d cuda: windows hold host memory")
	}
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	me := w.Rank()
	if w.Size() < 2 {
		log.Fatalf("%s: needs at least 2 ranks", name)
	}
	win, err := mpi.WinAllocate[byte](w, o.Max)
	Must(err)
	buf := make([]byte, o.Max)
	for i := range buf {
		buf[i] = 'a'
	}
	if me == 0 {
		title := "Put Latency Test"
		if get {
			title = "Get Latency Test"
		}
		Header(title, "Latency (us)")
	}
	for _, size := range o.Sizes() {
		if size < o.Min {
			continue
		}
		iters, warm := o.Counts(size)
		b := buf[:size]
		Must(mpi.Barrier(w))
		var lat float64
		if me == 0 {
			Must(win.Lock(mpi.LockShared, 1))
			var t0 float64
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				if get {
					Must(win.Get(b, 1, 0))
				} else {
					Must(win.Put(b, 1, 0))
				}
				Must(win.Flush(1))
			}
			lat = (mpi.Wtime() - t0) * 1e6 / float64(iters)
			Must(win.Unlock(1))
		}
		Must(mpi.Barrier(w))
		if me == 0 {
			Line(size, lat)
		}
	}
	Must(win.Free())
}
