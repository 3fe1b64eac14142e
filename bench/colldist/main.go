// Colldist prints the distribution of single-call latencies of small
// collectives, where the OSU benchmarks print a mean: the tail (a rank
// preempted, a garbage collection) shows apart from the typical call.
// Five loops of -i calls each, after 500 untimed: allreduce of -s bytes
// of float32 with a barrier before each call (as OSU times it), the same
// back to back, bcast of -s bytes from rank 0 the same two ways, and
// barrier back to back (with -nb, nonblocking calls instead; with
// -overlap, OSU's overlap of an Iallreduce with computation; with -dups,
// the back-to-back loops on fresh communicators). Every rank times each
// call alone; rank 0 prints, for each percentile and the mean, the
// largest over ranks, and the loop's wall time per call.
// tests/openmpi/colldist.c is the same program for Open MPI (built by
// its Makefile).
//
//	gorun -np 32 ./colldist -i 200000
package main

import (
	"flag"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	iters := flag.Int("i", 20000, "timed calls per loop")
	size := flag.Int("s", 8, "allreduce and bcast size in bytes (float32)")
	nb := flag.Bool("nb", false, "instead of the five loops, three of nonblocking calls back to back: Ibarrier then Wait, Iallreduce then Wait, Iallreduce then Test until done")
	overlap := flag.Int("overlap", 0, "instead of the five loops, OSU's overlap of an Iallreduce of this many bytes (float32) with computation (overlap.go)")
	dups := flag.Int("dups", 0, "instead of the five loops, the back-to-back bcast, allreduce and barrier on this many Dups of the world, made one after the other and kept (each gets new shared memory): whether a communicator's own pages set its speed, or the job or the host does")
	late := flag.Float64("late", 0, "instead of the five loops, barriers back to back with a report on the rank that made each call slower than this many microseconds late (late.go)")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if *overlap > 0 {
		overlapLoop(w, *iters, *overlap)
		return
	}
	if *late > 0 {
		lateLoop(w, *iters, *late)
		return
	}
	s, r := make([]float32, max(*size/4, 1)), make([]float32, max(*size/4, 1))
	d := make([]float64, max(*iters, 1))
	// run times loop name on c: f after a barrier (sep) or back to back.
	run := func(c *mpi.Comm, name string, sep bool, f func() error) {
		for range 500 {
			if err := f(); err != nil {
				log.Fatal(err)
			}
		}
		if err := mpi.Barrier(c); err != nil {
			log.Fatal(err)
		}
		start := time.Now()
		for i := range d {
			if sep {
				if err := mpi.Barrier(c); err != nil {
					log.Fatal(err)
				}
			}
			t := time.Now()
			if err := f(); err != nil {
				log.Fatal(err)
			}
			d[i] = float64(time.Since(t).Nanoseconds()) / 1e3
		}
		wall := float64(time.Since(start).Nanoseconds()) / 1e3 / float64(len(d))
		mean := 0.0
		for _, x := range d {
			mean += x
		}
		mean /= float64(len(d))
		slices.Sort(d)
		p := func(q float64) float64 { return d[int(q*float64(len(d)-1))] }
		st := []float64{p(0.1), p(0.5), p(0.9), p(0.99), p(0.999), mean, wall}
		mx := make([]float64, len(st))
		if err := mpi.Reduce(c, st, mx, mpi.Max, 0); err != nil {
			log.Fatal(err)
		}
		if c.Rank() == 0 {
			fmt.Printf("%-22s np=%d  maxrank: p10 %.2f p50 %.2f p90 %.2f p99 %.2f p999 %.2f mean %.2f per-iter-wall %.2f\n",
				name, c.Size(), mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], mx[6])
		}
	}
	if *dups > 0 {
		kept := make([]*mpi.Comm, *dups)
		for j := range kept {
			c, err := w.Dup()
			if err != nil {
				log.Fatal(err)
			}
			kept[j] = c
			run(c, fmt.Sprintf("dup %d bcast b2b", j), false, func() error { return mpi.Bcast(c, s, 0) })
			run(c, fmt.Sprintf("dup %d allreduce b2b", j), false, func() error { return mpi.Allreduce(c, s, r, mpi.Sum) })
			run(c, fmt.Sprintf("dup %d barrier b2b", j), false, func() error { return mpi.Barrier(c) })
		}
		for _, c := range kept {
			if err := c.Free(); err != nil {
				log.Fatal(err)
			}
		}
		return
	}
	if *nb {
		wait := func(q *mpi.Request, err error) error {
			if err != nil {
				return err
			}
			_, err = q.Wait()
			return err
		}
		run(w, "ibarrier+wait b2b", false, func() error { return wait(mpi.Ibarrier(w)) })
		run(w, "iallreduce+wait b2b", false, func() error { return wait(mpi.Iallreduce(w, s, r, mpi.Sum)) })
		run(w, "iallreduce+test b2b", false, func() error {
			q, err := mpi.Iallreduce(w, s, r, mpi.Sum)
			for err == nil {
				var ok bool
				if ok, _, err = q.Test(); ok {
					break
				}
			}
			return err
		})
		return
	}
	run(w, "allreduce+barrier", true, func() error { return mpi.Allreduce(w, s, r, mpi.Sum) })
	run(w, "allreduce b2b", false, func() error { return mpi.Allreduce(w, s, r, mpi.Sum) })
	run(w, "bcast+barrier", true, func() error { return mpi.Bcast(w, s, 0) })
	run(w, "bcast b2b", false, func() error { return mpi.Bcast(w, s, 0) })
	run(w, "barrier b2b", false, func() error { return mpi.Barrier(w) })
}
