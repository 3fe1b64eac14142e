// Command startup measures a job's first milliseconds (run it under
// gorun): rank 0 prints its Init time, its first Barrier's (the world's
// set-up, until Init did it), a Dup's first Barrier (a communicator's
// set-up without the start's spread) and the barrier times of the run
// after a pause of some kind, as "mean us / slowest us" of the blocks of
// 100 barriers in each 2 ms (docs/measurements.md, "The first call's
// set-up"). With -nb N it instead times N Iallreduce of 8 B and their
// Waits straight after Init, with no blocking collective before them
// (ns a call at rank 0).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/mpi"
)

func main() {
	pause := flag.String("pause", "none", "between the set-up and the timed barriers: none, sleep, spin (every rank), or imbalance (rank 0 spins while the others wait in a Barrier)")
	ms := flag.Int("ms", 50, "the pause's length in ms")
	blocks := flag.Int("blocks", 300, "blocks of 100 barriers (every rank makes as many)")
	nb := flag.Int("nb", 0, "time this many Iallreduce + Wait right after Init instead")
	flag.Parse()
	t0 := time.Now()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "Init:", err)
		os.Exit(1)
	}
	defer mpi.Finalize()
	w := mpi.World()
	tinit := time.Since(t0)
	if *nb > 0 {
		x := []int64{1}
		t := time.Now()
		for range *nb {
			q, err := mpi.Iallreduce(w, x, x, mpi.Sum)
			if err == nil {
				_, err = q.Wait()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "Iallreduce:", err)
				os.Exit(1)
			}
		}
		if w.Rank() == 0 {
			fmt.Printf("%.0f ns\n", float64(time.Since(t).Nanoseconds())/float64(*nb))
		}
		return
	}
	ts := time.Now()
	mpi.Barrier(w)
	tsetup := time.Since(ts)
	d := time.Duration(*ms) * time.Millisecond
	switch *pause {
	case "sleep":
		time.Sleep(d)
	case "spin", "imbalance":
		// imbalance: rank 0 alone computes while the others wait for it
		// in the Barrier below, after which they run on CPUs that idled
		// unless their wait polled (GORUN_WAIT_YIELD).
		if *pause == "spin" || w.Rank() == 0 {
			for s := time.Now(); time.Since(s) < d; {
			}
		}
	}
	mpi.Barrier(w)
	const blk = 100
	var means, maxs, at []float64
	start := time.Now()
	for range *blocks {
		var sum, mx time.Duration
		for range blk {
			t := time.Now()
			mpi.Barrier(w)
			d := time.Since(t)
			sum += d
			mx = max(mx, d)
		}
		means = append(means, float64(sum.Nanoseconds())/blk/1e3)
		maxs = append(maxs, float64(mx.Nanoseconds())/1e3)
		at = append(at, float64(time.Since(start).Microseconds())/1e3)
	}
	dc, err := w.Dup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Dup:", err)
		os.Exit(1)
	}
	mpi.Barrier(w)
	ts = time.Now()
	mpi.Barrier(dc)
	tdup := time.Since(ts)
	if w.Rank() != 0 {
		return
	}
	fmt.Printf("init %.1fms first-barrier %.2fms dup-setup %.2fms pause=%s %dms;", float64(tinit.Microseconds())/1e3, float64(tsetup.Microseconds())/1e3, float64(tdup.Microseconds())/1e3, *pause, *ms)
	k := 0
	for t := 2.0; k < len(means); t += 2 {
		var sum, mx float64
		c := 0
		for ; k < len(means) && at[k] < t; k++ {
			sum += means[k]
			mx = max(mx, maxs[k])
			c++
		}
		if c > 0 {
			fmt.Printf(" %.2f/%.0f", sum/float64(c), mx)
		}
	}
	fmt.Println()
}
