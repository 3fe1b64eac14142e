package main

import (
	"fmt"
	"log"
	"time"

	"github.com/gorun/gorun/mpi"
)

// overlapLoop measures, as OSU's osu_iallreduce does, how much of an
// Iallreduce of size bytes runs while the caller computes: pure is the
// mean time of Iallreduce then Wait; total that of Iallreduce, a busy
// loop of pure's length (no MPI call in it), then Wait; the overlap is
// 100 * (1 - (total - pure) / pure) percent (100: the call was over when
// the computation ended; 0: it ran only in the Wait). Times are the
// largest mean over ranks.
func overlapLoop(w *mpi.Comm, iters, size int) {
	n := max(size/4, 1)
	a, b := make([]float32, n), make([]float32, n)
	mean := func(compute time.Duration) float64 {
		call := func() {
			q, err := mpi.Iallreduce(w, a, b, mpi.Sum)
			if err != nil {
				log.Fatal(err)
			}
			for t := time.Now(); time.Since(t) < compute; {
			}
			if _, err := q.Wait(); err != nil {
				log.Fatal(err)
			}
		}
		for range max(iters/10, 10) {
			call()
		}
		if err := mpi.Barrier(w); err != nil {
			log.Fatal(err)
		}
		var sum time.Duration
		for range iters {
			if err := mpi.Barrier(w); err != nil {
				log.Fatal(err)
			}
			t := time.Now()
			call()
			sum += time.Since(t)
		}
		m := []float64{float64(sum.Nanoseconds()) / 1e3 / float64(iters)}
		if err := mpi.Allreduce(w, m, m, mpi.Max); err != nil {
			log.Fatal(err)
		}
		return m[0]
	}
	pure := mean(0)
	total := mean(time.Duration(pure * 1e3))
	if w.Rank() == 0 {
		fmt.Printf("iallreduce overlap %d B np=%d  pure %.2f total %.2f overlap %.1f%%\n",
			size, w.Size(), pure, total, max(0, 100*(1-(total-pure)/pure)))
	}
}
