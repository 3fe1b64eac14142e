// Msgphase splits the 8-byte message rate (osu_mbw_mr's window) into each
// side's own cost, with the other side idle: per iteration, rank 1 posts a
// window of -w Irecvs (timed: "post"), a barrier, then rank 0 sends the
// window and waits for it (timed: "send") while rank 1 spins on its clock
// without polling, then rank 1 waits for the window, its records already
// in its ring (timed: "recv"), and a barrier. Each figure is ns a message,
// the mean over -i iterations. osu_mbw_mr overlaps the two sides, so its
// rate is bounded by the slower one and by their contention on the lines
// they share; these figures tell which side's software costs what. Rank 1
// spins 1 µs a message of the window: enough for small messages; a size
// that the sender takes longer over (rendezvous) overlaps the phases.
// tests/openmpi/msgphase.c is the same program for Open MPI (built by its
// Makefile).
//
//	gorun -np 2 ./msgphase -i 20000
package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	iters := flag.Int("i", 20000, "iterations")
	win := flag.Int("w", 64, "messages a window")
	size := flag.Int("s", 8, "message size in bytes")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Size() != 2 {
		log.Fatalf("msgphase runs on 2 ranks, not %d", w.Size())
	}
	me := w.Rank()
	buf := make([]byte, *size)
	reqs := make([]*mpi.Request, *win)
	var post, send, recv time.Duration
	for range *iters {
		if me == 1 {
			t := time.Now()
			for k := range reqs {
				reqs[k] = must(mpi.Irecv(w, buf, 0, 100))
			}
			post += time.Since(t)
		}
		check(mpi.Barrier(w))
		if me == 0 {
			t := time.Now()
			for k := range reqs {
				reqs[k] = must(mpi.Isend(w, buf, 1, 100))
			}
			check(mpi.WaitallFree(reqs))
			send += time.Since(t)
		} else {
			// Long enough for the sender's window; nothing polls meanwhile.
			for t := time.Now(); time.Since(t) < time.Duration(*win)*time.Microsecond; {
			}
			t := time.Now()
			check(mpi.WaitallFree(reqs))
			recv += time.Since(t)
		}
		check(mpi.Barrier(w))
	}
	n := float64(*iters * *win)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n }
	if me == 0 {
		fmt.Printf("send %.1f ns/msg\n", per(send))
		_, err := mpi.Recv(w, buf[:0], 1, 101)
		check(err)
	} else {
		check(mpi.Send(w, buf[:0], 0, 101))
		fmt.Printf("post %.1f ns/msg recv %.1f ns/msg\n", per(post), per(recv))
	}
}

func must(r *mpi.Request, err error) *mpi.Request {
	check(err)
	return r
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
