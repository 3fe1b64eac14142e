// Commvar times the same small collectives on a series of fresh
// communicators within one job: whether a communicator's own shared
// memory (its segment's pages) sets how fast its collectives run, or
// something of the job or the host does. Each of -k Dups of the world
// (kept, so that each gets new pages, unless -free) times -i calls each
// of bcast, allreduce and barrier of 8 bytes back to back, then the
// bcast again, after 500 untimed calls each; rank 0 prints, per Dup, the
// mean time a call (µs) of the slowest rank.
//
//	gorun -np 2 ./commvar -k 12 -i 20000
//
// On the lent 16-core host (docs/measurements.md, twenty-ninth session)
// the Dups of one job ran within ~10% of each other, except where the
// whole job changed speed at once midway (np=2: every collective 30-40%
// faster from one Dup on, on old and new segments alike).
package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	k := flag.Int("k", 8, "communicators (Dups of the world), one after the other")
	iters := flag.Int("i", 20000, "timed calls a loop")
	free := flag.Bool("free", false, "free each Dup before the next (its pages may then be reused)")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	buf, out := make([]float32, 2), make([]float32, 2)
	mine, slowest := make([]float64, 1), make([]float64, 1)
	// timeit returns the slowest rank's mean µs a call of f on c.
	timeit := func(c *mpi.Comm, f func() error) float64 {
		for range 500 {
			if err := f(); err != nil {
				log.Fatal(err)
			}
		}
		if err := mpi.Barrier(c); err != nil {
			log.Fatal(err)
		}
		t0 := time.Now()
		for range *iters {
			if err := f(); err != nil {
				log.Fatal(err)
			}
		}
		mine[0] = float64(time.Since(t0).Nanoseconds()) / float64(*iters) / 1000
		if err := mpi.Reduce(c, mine, slowest, mpi.Max, 0); err != nil {
			log.Fatal(err)
		}
		return slowest[0]
	}
	var kept []*mpi.Comm
	for j := range *k {
		c, err := w.Dup()
		if err != nil {
			log.Fatal(err)
		}
		bcast := func() error { return mpi.Bcast(c, buf, 0) }
		b := timeit(c, bcast)
		a := timeit(c, func() error { return mpi.Allreduce(c, buf, out, mpi.Sum) })
		r := timeit(c, func() error { return mpi.Barrier(c) })
		b2 := timeit(c, bcast)
		if w.Rank() == 0 {
			fmt.Printf("dup %2d: bcast %.3f allreduce %.3f barrier %.3f bcast-again %.3f\n", j, b, a, r, b2)
		}
		if *free {
			if err := c.Free(); err != nil {
				log.Fatal(err)
			}
		} else {
			kept = append(kept, c)
		}
	}
	for _, c := range kept {
		if err := c.Free(); err != nil {
			log.Fatal(err)
		}
	}
}
