// Collsoak runs a random schedule of collective calls, every collective,
// blocking and nonblocking, on the world and three communicators derived
// from it, and checks every result against the one computed from the
// inputs (internal/collsoak says what the schedule holds):
//
//	gorun -np 8 ./bench/collsoak -n 1000000
//	GORUN_COLL_SHM=0 gorun -np 8 ./bench/collsoak -n 1000000 -seed 2
//	gorun -np 4 ./bench/collsoak -gpu -max 4194304 -n 20000
//
// A wrong result or a failed call prints the call (its number, collective,
// size, communicator, root, operation) and aborts the job with status 1;
// at the end rank 0 prints how many calls of each kind ran and how long
// they took.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/collsoak"
	"github.com/gorun/gorun/internal/soak"
	"github.com/gorun/gorun/mpi"
)

var (
	nCalls = flag.Int("n", 100000, "collective calls (a burst of nonblocking ones counts as one)")
	seed   = flag.Uint64("seed", 1, "seed of the schedule, the same on every rank")
	maxSz  = flag.Int("max", 160<<10, "largest buffer in bytes a rank passes")
	slow   = flag.Int("slow", 50, "one call in this many starts with one rank asleep for up to 2 ms (0: never)")
	onGPU  = flag.Bool("gpu", false, "device buffers and the GPU collectives (world rank r on GPU r mod the GPUs there are)")
)

func main() {
	flag.Parse()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "collsoak:", err)
		os.Exit(1)
	}
	w := mpi.World()
	if *nCalls < 0 || *maxSz < 0 || *slow < 0 {
		fmt.Fprintf(os.Stderr, "collsoak: bad flags: -n %d -max %d -slow %d\n", *nCalls, *maxSz, *slow)
		mpi.Abort(w, 1)
	}
	// Device memory free before and after: what a rank's GPU collectives
	// may keep is the world's regions and scratch, not a region for every
	// communicator made and freed along the run (coll/gpuretire.go). The
	// free memory is the whole device's, so every rank's context
	// (hundreds of MiB) exists before any rank reads it, and the
	// allowance is 512 MiB for each rank on the device (ranks r, r+k, ...
	// share GPU r mod k). (The first version read it before the other
	// ranks' contexts existed and allowed 1 GiB a device: at four ranks a
	// GPU it counted their contexts, 356-1250 MiB, as kept.)
	dev, share, free0 := -1, 0, uint64(0)
	if *onGPU {
		if k, err := gpu.DeviceCount(); err == nil && k > 0 {
			dev = w.Rank() % k
			share = (w.Size() - dev + k - 1) / k
			gpu.DeviceContext(dev)
			mpi.Barrier(w)
			free0 = devFree(dev)
		}
	}
	t0 := time.Now()
	n, err := collsoak.Run(w, collsoak.Config{Calls: *nCalls, Seed: *seed, Max: *maxSz, Slow: *slow, GPU: *onGPU})
	if err != nil {
		fmt.Fprintf(os.Stderr, "collsoak: rank %d: FAILED: %v\n", w.Rank(), err)
		mpi.Abort(w, 1)
	}
	if dev >= 0 {
		// Every rank has freed the run's communicators (and told its
		// peers it unmapped their regions) before this barrier; freeing
		// one more takes in what came since.
		mpi.Barrier(w)
		if d, err := w.Dup(); err == nil {
			d.Free()
		}
		// Dup, Split, the halves, their intercommunicator and ring, and
		// the communicators split off along the run.
		comms := 5 + n["comms_made"]
		if used := int64(free0) - int64(devFree(dev)); used > int64(share)<<29 {
			fmt.Fprintf(os.Stderr, "collsoak: rank %d: FAILED: device %d has %d MiB less free than before the run, more than %d ranks' 512 MiB (%d communicators made and freed along it: their regions should have come back)\n", w.Rank(), dev, used>>20, share, comms)
			mpi.Abort(w, 1)
		} else {
			fmt.Printf("collsoak: rank %d: device %d: %d MiB less free than before the run (%d communicators made and freed)\n", w.Rank(), dev, used>>20, comms)
		}
	}
	if w.Rank() == 0 {
		fmt.Printf("collsoak: %d calls at np=%d (seed %d) in %v, every result checked; rank 0's calls:\n", *nCalls, w.Size(), *seed, time.Since(t0).Round(time.Millisecond))
		soak.PrintCounts(os.Stdout, n)
	}
	mpi.Finalize()
}

// devFree is device dev's free memory in bytes (0 if the driver cannot
// tell).
func devFree(dev int) uint64 {
	c, err := gpu.DeviceContext(dev)
	if err != nil {
		return 0
	}
	f, _, err := c.MemInfo()
	if err != nil {
		return 0
	}
	return f
}
