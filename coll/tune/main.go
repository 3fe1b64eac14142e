// Tune measures every algorithm of the chosen collectives side by side,
// to derive the selection tables of package coll (coll/tables.go) and the
// figures in coll/MEASUREMENTS.md:
//
//	gorun -np 4 ./coll/tune -coll allreduce,bcast -m 8:1048576
//
// Method (OSU's, per algorithm): for each size, the algorithms take turns
// (-r rounds of -i timed calls each, after -x warm-up calls, so that drift
// on a shared machine hits them alike); every call is timed alone and
// followed by an untimed barrier; an algorithm's figure for a round is the
// per-rank average in microseconds, the maximum over ranks, and its
// figure for the size the median over rounds. One line per size: the size
// in bytes (message size as the tables read it: the whole buffer for
// reductions and Bcast, the per-rank block for the gather family and
// Alltoall), each algorithm's figure, the fastest, and what the current
// table picks.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/gorun/gorun/mpi"
)

var (
	colls  = flag.String("coll", "allreduce,bcast,reduce,allgather,alltoall,barrier", "collectives to measure")
	sizes  = flag.String("m", "8:1048576", "sizes MIN:MAX in bytes (powers of 4 from MIN)")
	iters  = flag.Int("i", 0, "timed calls per round (0: 200 up to 8 KiB, 20 above)")
	warm   = flag.Int("x", 5, "warm-up calls per round")
	rounds = flag.Int("r", 5, "rounds")
	prof   = flag.String("cpuprofile", "", "write rank 0's CPU profile to this file")
)

func main() {
	flag.Parse()
	var lo, hi int
	if _, err := fmt.Sscanf(strings.Replace(*sizes, ":", " ", 1), "%d %d", &lo, &hi); err != nil {
		log.Fatalf("tune: -m %q: %v", *sizes, err)
	}
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if *prof != "" && w.Rank() == 0 {
		f, err := os.Create(*prof)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	for _, name := range strings.Split(*colls, ",") {
		algs := mpi.CollAlgorithms(name)
		if algs == nil {
			log.Fatalf("tune: no collective %q", name)
		}
		algs = slices.DeleteFunc(algs, func(a string) bool { return a == "hier" })
		op := operation(w, name, hi)
		if w.Rank() == 0 {
			fmt.Printf("# %s, np %d: median of %d rounds, us; last columns: fastest, table\n", name, w.Size(), *rounds)
			fmt.Printf("%-9s", "# size")
			for _, a := range algs {
				fmt.Printf(" %18s", a)
			}
			fmt.Printf(" %18s %18s\n", "fastest", "table")
		}
		for size := lo; size <= hi; size *= 4 {
			if name == "barrier" && size != lo {
				break
			}
			n := *iters
			if n == 0 {
				n = 200
				if size > 8192 {
					n = 20
				}
			}
			res := make([][]float64, len(algs))
			for range *rounds {
				for i, a := range algs {
					must(mpi.SetCollAlgorithm(name, a))
					res[i] = append(res[i], timed(w, func() error { return op(size) }, n, *warm))
				}
			}
			must(mpi.SetCollAlgorithm(name, ""))
			table := timed(w, func() error { return op(size) }, n, *warm)
			if w.Rank() == 0 {
				fmt.Printf("%-9d", size)
				best, bi := 0.0, 0
				for i := range algs {
					m := median(res[i])
					fmt.Printf(" %18.2f", m)
					if i == 0 || m < best {
						best, bi = m, i
					}
				}
				fmt.Printf(" %18s %18.2f\n", algs[bi], table)
			}
		}
	}
}

// operation returns the collective call of a given size in bytes.
func operation(w *mpi.Comm, name string, max int) func(size int) error {
	n := w.Size()
	f32 := make([]float32, max/4+1)
	out32 := make([]float32, (max/4+1)*n)
	b := make([]byte, max*n)
	rb := make([]byte, max*n)
	for i := range f32 {
		f32[i] = 1
	}
	switch name {
	case "allreduce":
		return func(s int) error { return mpi.Allreduce(w, f32[:s/4], out32[:s/4], mpi.Sum) }
	case "reduce":
		return func(s int) error { return mpi.Reduce(w, f32[:s/4], out32[:s/4], mpi.Sum, 0) }
	case "bcast":
		return func(s int) error { return mpi.Bcast(w, b[:s], 0) }
	case "allgather":
		return func(s int) error { return mpi.Allgather(w, b[:s], rb[:s*n]) }
	case "gather":
		return func(s int) error { return mpi.Gather(w, b[:s], rb[:s*n], 0) }
	case "scatter":
		return func(s int) error { return mpi.Scatter(w, b[:s*n], rb[:s], 0) }
	case "alltoall":
		return func(s int) error { return mpi.Alltoall(w, b[:s*n], rb[:s*n]) }
	case "reduce_scatter_block":
		return func(s int) error {
			k := s / 4 / n
			return mpi.ReduceScatterBlock(w, f32[:k*n], out32[:k], mpi.Sum)
		}
	case "scan":
		return func(s int) error { return mpi.Scan(w, f32[:s/4], out32[:s/4], mpi.Sum) }
	case "barrier":
		return func(int) error { return mpi.Barrier(w) }
	}
	log.Fatalf("tune: no operation for %q", name)
	return nil
}

// timed runs op warm+n times, each call timed alone and followed by a
// barrier, and returns the average of the timed calls in µs, the maximum
// over ranks.
func timed(w *mpi.Comm, op func() error, n, warm int) float64 {
	must(mpi.Barrier(w))
	t := 0.0
	for i := 0; i < n+warm; i++ {
		t0 := mpi.Wtime()
		must(op())
		t1 := mpi.Wtime()
		if i >= warm {
			t += t1 - t0
		}
		must(mpi.Barrier(w))
	}
	v := []float64{t * 1e6 / float64(n)}
	must(mpi.Allreduce(w, v, v, mpi.Max))
	return v[0]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
