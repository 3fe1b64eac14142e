// Exchange times a small exchange between two ranks in each of the ways a
// program may write it, ns a call: both ranks post a receive from the
// other and send to it, then complete both (-m sendrecv: Sendrecv;
// waitallfree: Irecv, Isend, WaitallFree; waitall: the same with Waitall;
// wait: each request's Wait; waitfree: each request's WaitFree; pingpong: Send then Recv on rank 0, Recv then
// Send on rank 1, a round trip a call). It tells what each completion
// style costs on top of the transport, which the OSU programs (one style
// each) do not. tests/openmpi/exchange.c is the same program for Open MPI
// (built by its Makefile; its waitallfree is MPI_Waitall, which frees the
// requests).
//
//	gorun -np 2 ./exchange -m waitall -i 300000
package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	iters := flag.Int("i", 300000, "calls a round")
	rounds := flag.Int("r", 5, "rounds (one figure each)")
	size := flag.Int("s", 8, "message size in bytes")
	mode := flag.String("m", "sendrecv", "sendrecv | waitallfree | waitall | wait | waitfree | pingpong")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Size() != 2 {
		log.Fatalf("exchange runs on 2 ranks, not %d", w.Size())
	}
	me := w.Rank()
	peer := 1 - me
	out, in := make([]byte, *size), make([]byte, *size)
	reqs := make([]*mpi.Request, 2)
	call, ok := map[string]func() error{
		"sendrecv": func() error {
			_, err := mpi.Sendrecv(w, out, peer, 1, in, peer, 1)
			return err
		},
		"waitallfree": func() error {
			post(w, reqs, in, out, peer)
			return mpi.WaitallFree(reqs)
		},
		"waitall": func() error {
			post(w, reqs, in, out, peer)
			_, err := mpi.Waitall(reqs)
			return err
		},
		"wait":     eachWait(w, reqs, in, out, peer, (*mpi.Request).Wait),
		"waitfree": eachWait(w, reqs, in, out, peer, (*mpi.Request).WaitFree),
		"pingpong": func() error {
			if me == 0 {
				if err := mpi.Send(w, out, peer, 1); err != nil {
					return err
				}
				_, err := mpi.Recv(w, in, peer, 1)
				return err
			}
			if _, err := mpi.Recv(w, in, peer, 1); err != nil {
				return err
			}
			return mpi.Send(w, out, peer, 1)
		},
	}[*mode]
	if !ok {
		log.Fatalf("-m %q: not one of sendrecv, waitallfree, waitall, wait, waitfree, pingpong", *mode)
	}
	run := func(n int) time.Duration {
		t := time.Now()
		for range n {
			if err := call(); err != nil {
				log.Fatal(err)
			}
		}
		return time.Since(t)
	}
	run(min(*iters, 10000))
	for range *rounds {
		d := run(*iters)
		if me == 0 {
			fmt.Printf("%.1f ", float64(d.Nanoseconds())/float64(*iters))
		}
	}
	if me == 0 {
		fmt.Printf("ns a call (%s, %d B)\n", *mode, *size)
	}
}

// post starts the receive from peer into in and the send of out to it.
func post(w *mpi.Comm, reqs []*mpi.Request, in, out []byte, peer int) {
	var err error
	if reqs[0], err = mpi.Irecv(w, in, peer, 1); err != nil {
		log.Fatal(err)
	}
	if reqs[1], err = mpi.Isend(w, out, peer, 1); err != nil {
		log.Fatal(err)
	}
}

// eachWait is the call that posts the exchange and completes each request
// by wait (Wait or WaitFree).
func eachWait(w *mpi.Comm, reqs []*mpi.Request, in, out []byte, peer int, wait func(*mpi.Request) (mpi.Status, error)) func() error {
	return func() error {
		post(w, reqs, in, out, peer)
		for _, q := range reqs {
			if _, err := wait(q); err != nil {
				return err
			}
		}
		return nil
	}
}
