package main

import (
	"fmt"
	"log"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/gorun/gorun/mpi"
)

// The -late loop: barriers back to back, each rank recording, around
// every call, the monotonic clock (shared by the host's processes), the
// OS thread it ran on and that thread's context switches (getrusage of
// the thread: voluntary and involuntary). Rank 0 gathers them and, for
// every slow call (the slowest rank's call longer than -late
// microseconds), names the rank that entered last and says where its
// delay came from: the kernel took its CPU (an involuntary switch of its
// thread during the previous call or between the calls), its goroutine
// changed threads, it slept (a voluntary switch), or none of these.

const lateFields = 6 // entry, exit ns; tid at entry, at exit; involuntary switches at entry; voluntary ones during the call

func now() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func switches() (vol, invol int64) {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return ru.Nvcsw, ru.Nivcsw
}

func lateLoop(w *mpi.Comm, iters int, slowUs float64) {
	rec := make([]int64, iters*lateFields)
	for range 500 {
		if err := mpi.Barrier(w); err != nil {
			log.Fatal(err)
		}
	}
	for i := range iters {
		v0, iv0 := switches()
		t0 := int64(unix.Gettid())
		e := now()
		if err := mpi.Barrier(w); err != nil {
			log.Fatal(err)
		}
		x := now()
		t1 := int64(unix.Gettid())
		v1, _ := switches()
		copy(rec[i*lateFields:], []int64{e, x, t0, t1, iv0, v1 - v0})
	}
	var all []int64
	if w.Rank() == 0 {
		all = make([]int64, len(rec)*w.Size())
	}
	if err := mpi.Gather(w, rec, all, 0); err != nil {
		log.Fatal(err)
	}
	if w.Rank() == 0 {
		lateReport(all, w.Size(), iters, slowUs)
	}
}

func lateReport(all []int64, n, iters int, slowUs float64) {
	at := func(r, i, f int) int64 { return all[(r*iters+i)*lateFields+f] }
	const (
		fE = iota
		fX
		fT0
		fT1
		fIV0
		fV
	)
	type cause struct{ n, preempt, moved, slept, none int }
	var c cause
	var lates []float64
	perRank := make([]int, n)
	ents := make([]int64, n)
	for i := 1; i < iters; i++ {
		worst := int64(0)
		for r := range n {
			worst = max(worst, at(r, i, fX)-at(r, i, fE))
		}
		if float64(worst)/1e3 < slowUs {
			continue
		}
		for r := range n {
			ents[r] = at(r, i, fE)
		}
		last := 0
		for r := range n {
			if ents[r] > ents[last] {
				last = r
			}
		}
		s := slices.Clone(ents)
		slices.Sort(s)
		late := float64(ents[last]-s[(n-1)/2]) / 1e3
		lates = append(lates, late)
		c.n++
		perRank[last]++
		// The late rank's previous call and the gap after it.
		L := last
		preempt := at(L, i, fIV0)-at(L, i-1, fIV0) > 0 && at(L, i, fT0) == at(L, i-1, fT0)
		moved := at(L, i-1, fT0) != at(L, i-1, fT1) || at(L, i-1, fT1) != at(L, i, fT0)
		slept := at(L, i-1, fV) > 0
		switch {
		case preempt:
			c.preempt++
		case moved:
			c.moved++
		case slept:
			c.slept++
		default:
			c.none++
		}
	}
	fmt.Printf("late: np=%d, %d barriers, %d slower than %.0f us at the slowest rank\n", n, iters, c.n, slowUs)
	if c.n == 0 {
		return
	}
	sort.Float64s(lates)
	q := func(p float64) float64 { return lates[int(p*float64(len(lates)-1))] }
	fmt.Printf("late: the last rank's entry after the median entry (us; np=2: after the other): p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
		q(0.1), q(0.5), q(0.9), q(0.99), q(1))
	fmt.Printf("late: its previous call or the gap after it had: an involuntary switch %d, a thread change %d, a voluntary switch %d, none %d\n",
		c.preempt, c.moved, c.slept, c.none)
	type rc struct{ r, k int }
	var top []rc
	for r, k := range perRank {
		if k > 0 {
			top = append(top, rc{r, k})
		}
	}
	sort.Slice(top, func(a, b int) bool { return top[a].k > top[b].k })
	fmt.Printf("late: ranks last most often:")
	for _, t := range top[:min(len(top), 12)] {
		fmt.Printf(" %d:%d", t.r, t.k)
	}
	fmt.Println()
	// Per rank over all calls: involuntary switches and thread changes.
	var ivs, moves []int
	for r := range n {
		iv, mv := 0, 0
		for i := 1; i < iters; i++ {
			if at(r, i, fT0) == at(r, i-1, fT0) {
				iv += int(at(r, i, fIV0) - at(r, i-1, fIV0))
			}
			if at(r, i, fT0) != at(r, i-1, fT0) {
				mv++
			}
		}
		ivs, moves = append(ivs, iv), append(moves, mv)
	}
	slices.Sort(ivs)
	slices.Sort(moves)
	fmt.Printf("late: per rank over %d calls: involuntary switches min %d median %d max %d; thread changes min %d median %d max %d\n",
		iters, ivs[0], ivs[n/2], ivs[n-1], moves[0], moves[n/2], moves[n-1])
}
