// P2psoak runs a random schedule of point-to-point messages, every way of
// sending and receiving one (wildcards, probes, persistent, buffered and
// synchronous sends, cancelled receives), on the world and two
// communicators derived from it, and checks every message
// (internal/p2psoak says what the schedule holds):
//
//	gorun -np 8 ./bench/p2psoak -n 100000
//	GORUN_BTL=tcp,self gorun -np 4 ./bench/p2psoak -n 20000 -seed 2
//	gorun -np 4 ./bench/p2psoak -gpu -max 4194304 -n 5000
//
// A wrong message or a failed call prints the round and the message (its
// index, size, ranks, communicator, tag, how it was sent) and aborts the
// job with status 1, a round that does not end within -stall its messages
// at the rank that waits, with status 2; at the end rank 0 prints how many of each way it sent
// and received.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/internal/p2psoak"
	"github.com/gorun/gorun/internal/soak"
	"github.com/gorun/gorun/mpi"
)

var (
	nRounds = flag.Int("n", 10000, "rounds (each up to 3 messages a rank)")
	seed    = flag.Uint64("seed", 1, "seed of the schedule, the same on every rank")
	maxSz   = flag.Int("max", 256<<10, "largest message in bytes")
	slow    = flag.Int("slow", 50, "one round in this many starts with one rank asleep for up to 2 ms (0: never)")
	stall   = flag.Duration("stall", 2*time.Minute, "a round not ended at a rank after this long prints its messages there and aborts the job (0: never)")
	onGPU   = flag.Bool("gpu", false, "a third of the messages sent from device memory, some received into it (world rank r on GPU r mod the GPUs there are)")
)

func main() {
	flag.Parse()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "p2psoak:", err)
		os.Exit(1)
	}
	w := mpi.World()
	if *nRounds < 0 || *maxSz < 0 || *slow < 0 {
		fmt.Fprintf(os.Stderr, "p2psoak: bad flags: -n %d -max %d -slow %d\n", *nRounds, *maxSz, *slow)
		mpi.Abort(w, 1)
	}
	t0 := time.Now()
	n, err := p2psoak.Run(w, p2psoak.Config{Rounds: *nRounds, Seed: *seed, Max: *maxSz, Slow: *slow, GPU: *onGPU, Stall: *stall})
	if err != nil {
		fmt.Fprintf(os.Stderr, "p2psoak: rank %d: FAILED: %v\n", w.Rank(), err)
		mpi.Abort(w, 1)
	}
	if w.Rank() == 0 {
		fmt.Printf("p2psoak: %d rounds at np=%d (seed %d) in %v, every message checked; rank 0's:\n", *nRounds, w.Size(), *seed, time.Since(t0).Round(time.Millisecond))
		soak.PrintCounts(os.Stdout, n)
	}
	mpi.Finalize()
}
