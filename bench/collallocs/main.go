// Collallocs prints what small blocking collectives allocate per call
// (bytes and allocations, from runtime.MemStats, rank 0's) and their time
// per call: 100,000 calls of each of Alltoall (one float64 a rank),
// Allreduce, Bcast (8 B) and Barrier after 20,000 untimed ones. The
// point-to-point algorithms' garbage is what it is for
// (docs/measurements.md, "Message rate"); run them with the shared-memory
// ones off. PROF=<collective> writes rank 0's allocation profile of that
// collective to /tmp/heap-<collective> (go tool pprof).
//
//	GORUN_COLL_SHM=0 gorun -np 2 ./collallocs
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	runtime.MemProfileRate = 64
	if err := mpi.Init(); err != nil {
		panic(err)
	}
	w := mpi.World()
	n := w.Size()
	x, y := make([]float64, n), make([]float64, n)
	b := make([]float64, 1)
	type cs struct {
		name string
		f    func() error
	}
	for _, c := range []cs{
		{"alltoall", func() error { return mpi.Alltoall(w, x, y) }},
		{"allreduce", func() error { return mpi.Allreduce(w, x[:1], y[:1], mpi.Sum) }},
		{"bcast", func() error { return mpi.Bcast(w, b, 0) }},
		{"barrier", func() error { return mpi.Barrier(w) }},
	} {
		for range 20000 {
			if err := c.f(); err != nil {
				panic(err)
			}
		}
		const calls = 100000
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		for range calls {
			if err := c.f(); err != nil {
				panic(err)
			}
		}
		el := time.Since(t0)
		if f := os.Getenv("PROF"); f != "" && f == c.name && w.Rank() == 0 {
			out, _ := os.Create("/tmp/heap-" + c.name)
			pprof.Lookup("allocs").WriteTo(out, 0)
			out.Close()
		}
		runtime.ReadMemStats(&m1)
		if w.Rank() == 0 {
			fmt.Fprintf(os.Stdout, "np=%d %-10s %6.1f B/call %5.2f allocs/call %6.2f us/call\n", n, c.name,
				float64(m1.TotalAlloc-m0.TotalAlloc)/calls, float64(m1.Mallocs-m0.Mallocs)/calls, el.Seconds()*1e6/calls)
		}
	}
	mpi.Finalize()
}
