package coll

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gorun/gorun/internal/params"
)

// The report of GORUN_COLL_REPORT: how many calls each algorithm of each
// collective ran in this process on communicators of more than one rank
// (the tables' choices, an override, or the table's choice where a forced
// algorithm does not apply; a hierarchical algorithm's levels count as
// runs of their own algorithms too), and how many GPU push launches ran
// their kernels or fell back where the IPC regions or the kernels did not
// serve. For a user who wants to know what a job's calls took, and for
// tests that force an algorithm. Nothing is counted while the report is
// off.

var pReport = params.Int("GORUN_COLL_REPORT", 0,
	"1: print, as the process finalizes, how many calls each collective algorithm ran in it and how many GPU push launches ran their kernels (a two-shot allreduce makes two or three a call) or fell back (stderr, a line a rank)")

// reporting reports whether calls are counted (GORUN_COLL_REPORT=1).
var reporting = sync.OnceValue(func() bool { return pReport() == 1 })

// pushRan and pushFellBack count the GPU push launches (devCall.push)
// that ran their kernels, and those that ran their fall-back instead.
var pushRan, pushFellBack atomic.Uint64

// count counts a call of algorithm i of k.
func (k *collective) count(i int) {
	if reporting() {
		k.ran[i].Add(1)
	}
}

// Reporting reports whether GORUN_COLL_REPORT asks for the report.
func Reporting() bool { return reporting() }

// Report is the counts, the collectives in registration order, each
// algorithm that ran at least once as collective/algorithm and its
// count, then the GPU push launches: "allreduce/ring 5, bcast/binomial 3;
// GPU push: 0 ran, 0 fell back".
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
	fmt.Fprintf(&b, "; GPU push: %d ran, %d fell back", pushRan.Load(), pushFellBack.Load())
	return b.String()
}
