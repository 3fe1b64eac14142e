package osu

import (
	"errors"

	"github.com/gorun/gorun/mpi"
)

// RMALatency is the one-sided latency method of tests/openmpi/osu_rma.h
// (osu_put_latency's default): every rank allocates a window of the
// largest size; rank 0 locks rank 1's part (shared) and times the
// operation of each size, each followed by Flush; the figure is the time
// per operation and flush in microseconds. kind is "put", "get", "acc"
// (Accumulate with Sum of int32 elements: sizes from 4 bytes) or "fop"
// (FetchAndOp of one int64 with Sum: one size, 8 bytes).
func RMALatency(name, kind string) {
	defMin, defMax := 1, 4<<20
	switch kind {
	case "acc":
		defMin = 4
	case "fop":
		defMin, defMax = 8, 8
	}
	o := Parse(name, defMin, defMax, 10000, 1000, 1000, 100, 8192)
	if o.Device {
		fail(name, "-d cuda: windows hold host memory")
	}
	w := InitPair(name)
	defer mpi.Finalize()
	me := w.Rank()
	win, err := mpi.WinAllocate[byte](w, o.Max)
	Must(err)
	buf := make([]byte, o.Max)
	for i := range buf {
		buf[i] = 'a'
	}
	ints, err := mpi.WinAllocate[int32](w, (o.Max+3)/4)
	Must(err)
	vals := make([]int32, (o.Max+3)/4)
	counter, err := mpi.WinAllocate[int64](w, 1)
	Must(err)
	var old int64
	if me == 0 {
		Header(map[string]string{"put": "Put Latency Test", "get": "Get Latency Test",
			"acc": "Accumulate Latency Test", "fop": "Fetch_and_op Latency Test"}[kind], "Latency (us)")
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
			Must(ints.Lock(mpi.LockShared, 1))
			Must(counter.Lock(mpi.LockShared, 1))
			var t0 float64
			for i := 0; i < iters+warm; i++ {
				if i == warm {
					t0 = mpi.Wtime()
				}
				switch kind {
				case "get":
					Must(win.Get(b, 1, 0))
					Must(win.Flush(1))
				case "put":
					Must(win.Put(b, 1, 0))
					Must(win.Flush(1))
				case "acc":
					Must(ints.Accumulate(vals[:size/4], 1, 0, mpi.Sum))
					Must(ints.Flush(1))
				case "fop":
					Must(counter.FetchAndOp(1, &old, 1, 0, mpi.Sum))
					Must(counter.Flush(1))
				}
			}
			lat = (mpi.Wtime() - t0) * 1e6 / float64(iters)
			Must(errors.Join(win.Unlock(1), ints.Unlock(1), counter.Unlock(1)))
		}
		Must(mpi.Barrier(w))
		if me == 0 {
			Line(size, lat)
		}
	}
	Must(errors.Join(win.Free(), ints.Free(), counter.Free()))
}
