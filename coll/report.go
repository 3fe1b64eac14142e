package coll

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/gorun/gorun/internal/params"
)

// The report of GORUN_COLL_REPORT: how many calls each algorithm of each
// collective began in this process on communicators of more than one
// rank (the tables' choices, an override, or the table's choice where a
// forced algorithm does not apply; a hierarchical algorithm's levels, and
// the package's own exchanges, such as set-ups and the ipc algorithms'
// barriers, count too), and, by kind, how many GPU push launches ran
// their kernels or fell back where the IPC regions or the kernels did not
// serve (an algorithm's own fall-back is counted there, not in the
// algorithm's count). For a user who wants to know what a job's calls
// took, and for tests that force an algorithm. Nothing is counted while
// the report is off.

var pReport = params.Int("GORUN_COLL_REPORT", 0,
	"1: print, as the process finalizes, how many calls each collective algorithm began in it and, by kind, how many GPU push launches ran their kernels (a two-shot allreduce makes two or three a call) or fell back (stderr, a line a rank)")

// reporting: calls are counted (GORUN_COLL_REPORT=1), read once as the
// process starts, so that every collective call pays a load and a branch.
var reporting = pReport() == 1

// pushes counts the GPU push launches (devCall.push) by kind (its what):
// [0] those that ran their kernels, [1] those that ran their fall-back.
var pushes struct {
	sync.Mutex
	n map[string]*[2]uint64
}

// countPush counts a push launch of kind what that ran its kernels, or
// its fall-back.
func countPush(what string, fellBack bool) {
	if !reporting {
		return
	}
	pushes.Lock()
	defer pushes.Unlock()
	if pushes.n == nil {
		pushes.n = map[string]*[2]uint64{}
	}
	c := pushes.n[what]
	if c == nil {
		c = new([2]uint64)
		pushes.n[what] = c
	}
	if fellBack {
		c[1]++
	} else {
		c[0]++
	}
}

// count counts a call of algorithm i of k.
func (k *collective) count(i int) {
	if reporting {
		k.ran[i].Add(1)
	}
}

// Reporting reports whether GORUN_COLL_REPORT asks for the report.
func Reporting() bool { return reporting }

// Report is the counts: the collectives in registration order, each
// algorithm that began at least once as collective/algorithm and its
// count, then the GPU push launches by kind, in name order: "allreduce/ring
// 5, bcast/shm 3; GPU push: none" or "...; GPU push: allreduce 40 ran 2
// fell back, bcast 12 ran 0 fell back".
func Report() string {
	var b strings.Builder
	for _, k := range collList {
		for i := range k.ran {
			if n := k.ran[i].Load(); n > 0 {
				if b.Len() > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s/%s %d", k.name, k.algs[i].name, n)
			}
		}
	}
	if b.Len() == 0 {
		b.WriteString("no collective calls")
	}
	b.WriteString("; GPU push:")
	pushes.Lock()
	defer pushes.Unlock()
	if len(pushes.n) == 0 {
		b.WriteString(" none")
	}
	for i, what := range slices.Sorted(maps.Keys(pushes.n)) {
		if i > 0 {
			b.WriteString(",")
		}
		c := pushes.n[what]
		fmt.Fprintf(&b, " %s %d ran %d fell back", what, c[0], c[1])
	}
	return b.String()
}
