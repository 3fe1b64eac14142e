package tests

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// A collective that fails at one rank only (its arguments are wrong there
// and fine elsewhere) must leave the communicator usable: package mpi
// promises it (mpi/collective.go), and package coll aborts the call on
// every rank (coll/notice.go). The case runs each such failure twice, on
// a fresh communicator (the failing call is its first: the shared-memory
// collectives set up their segment then) and on one that has already run
// a collective, and after each runs Barrier, Bcast from every root,
// Allreduce and Reduce on the same communicator and checks their results.
// The test runs it with the shared-memory collectives (the default on one
// host) and without them (GORUN_COLL_SHM=0: point-to-point algorithms).

func init() {
	rankCases["coll-fail-one"] = caseCollFailOne
	rawCases["finalize-after-mismatch"] = caseFinalizeAfterMismatch
}

// oneRankFailure is a collective call whose arguments are wrong at rank
// bad only.
type oneRankFailure struct {
	name string
	// call runs the collective; bad is true at the rank whose arguments
	// are wrong.
	call func(w *mpi.Comm, bad bool) error
	// classes are the error classes any rank may see (the first one is the
	// bad rank's, unless anyOf is set); every: every rank must fail.
	classes []mpi.Class
	every   bool
	anyOf   bool
}

var oneRankFailures = []oneRankFailure{
	{name: "Bcast with an out-of-range root at one rank (root 0 elsewhere)", classes: []mpi.Class{mpi.ErrRoot},
		call: func(w *mpi.Comm, bad bool) error {
			root := 0
			if bad {
				root = w.Size() + 3
			}
			return mpi.Bcast(w, []int{1, 2, 3}, root)
		}},
	{name: "Bcast with a negative root at the root (root 1 elsewhere)", classes: []mpi.Class{mpi.ErrRoot}, every: true,
		call: func(w *mpi.Comm, bad bool) error {
			root := 1
			if bad {
				root = -1
			}
			return mpi.Bcast(w, []int{1, 2, 3}, root)
		}},
	{name: "Reduce with an out-of-range root at one rank", classes: []mpi.Class{mpi.ErrRoot},
		call: func(w *mpi.Comm, bad bool) error {
			root := 0
			if bad {
				root = w.Size()
			}
			return mpi.Reduce(w, []float64{1, 2}, make([]float64, 2), mpi.Sum, root)
		}},
	{name: "Allreduce with the zero Op at one rank", classes: []mpi.Class{mpi.ErrOp}, every: true,
		call: func(w *mpi.Comm, bad bool) error {
			op := mpi.Sum
			if bad {
				op = mpi.Op{}
			}
			x := []int32{1, 2, 3, 4}
			return mpi.Allreduce(w, x, x, op)
		}},
	{name: "Allreduce with overlapping buffers at one rank", classes: []mpi.Class{mpi.ErrBuffer}, every: true,
		call: func(w *mpi.Comm, bad bool) error {
			b := make([]int, 10)
			if bad {
				return mpi.Allreduce(w, b[0:5], b[2:7], mpi.Sum)
			}
			return mpi.Allreduce(w, b[0:5], b[5:10], mpi.Sum)
		}},
	{name: "Allreduce with fewer elements at one rank", classes: []mpi.Class{mpi.ErrCount, mpi.ErrTruncate}, every: true, anyOf: true,
		call: func(w *mpi.Comm, bad bool) error {
			x := make([]float32, 12)
			if bad {
				x = x[:5]
			}
			return mpi.Allreduce(w, x, x, mpi.Sum)
		}},
	{name: "Allgather with a short receive buffer at one rank", classes: []mpi.Class{mpi.ErrCount},
		call: func(w *mpi.Comm, bad bool) error {
			k := w.Size()
			if bad {
				k--
			}
			return mpi.Allgather(w, []int{w.Rank()}, make([]int, k))
		}},
}

// caseCollFailOne runs every oneRankFailure at rank 1 on a fresh
// communicator and on a used one, and checks the communicator afterwards.
func caseCollFailOne(w *mpi.Comm) error {
	if w.Size() < 2 {
		return fmt.Errorf("coll-fail-one needs 2 ranks or more")
	}
	const bad = 1
	me := w.Rank()
	for _, f := range oneRankFailures {
		for _, fresh := range []bool{true, false} {
			what := f.name
			if fresh {
				what += " (first call on the communicator)"
			}
			c, err := w.Dup()
			if err != nil {
				return err
			}
			if !fresh {
				if err := mpi.Barrier(c); err != nil {
					return fmt.Errorf("%s: barrier before: %v", what, err)
				}
			}
			err = f.call(c, me == bad)
			if err := f.check(err, me == bad); err != nil {
				return fmt.Errorf("%s: rank %d: %v", what, me, err)
			}
			if err := collStillWorks(c); err != nil {
				return fmt.Errorf("after %s: %v", what, err)
			}
			if err := c.Free(); err != nil {
				return err
			}
		}
	}
	return nil
}

// check judges one rank's outcome of a oneRankFailure.
func (f *oneRankFailure) check(err error, bad bool) error {
	if err == nil {
		if bad || f.every {
			return fmt.Errorf("succeeded; want %v", f.classes)
		}
		return nil
	}
	want := f.classes
	if bad && !f.anyOf {
		want = want[:1]
	}
	for _, cl := range want {
		if errors.Is(err, cl) {
			return nil
		}
	}
	return fmt.Errorf("want %v, got %v", want, err)
}

// collStillWorks runs Barrier, Bcast from every root, Allreduce and
// Reduce on c and checks their results.
func collStillWorks(c *mpi.Comm) error {
	n, me := c.Size(), c.Rank()
	if err := mpi.Barrier(c); err != nil {
		return fmt.Errorf("Barrier: %v", err)
	}
	for root := range n {
		buf := []int{-1, -1, -1}
		if me == root {
			buf = []int{root, 10 * root, 100 * root}
		}
		if err := mpi.Bcast(c, buf, root); err != nil {
			return fmt.Errorf("Bcast root %d: %v", root, err)
		}
		if buf[0] != root || buf[1] != 10*root || buf[2] != 100*root {
			return fmt.Errorf("Bcast root %d: got %v", root, buf)
		}
	}
	x := []int{me, 1}
	if err := mpi.Allreduce(c, x, x, mpi.Sum); err != nil {
		return fmt.Errorf("Allreduce: %v", err)
	}
	if x[0] != n*(n-1)/2 || x[1] != n {
		return fmt.Errorf("Allreduce: got %v, want [%d %d]", x, n*(n-1)/2, n)
	}
	out := make([]float64, 1)
	if err := mpi.Reduce(c, []float64{float64(me + 1)}, out, mpi.Max, n-1); err != nil {
		return fmt.Errorf("Reduce: %v", err)
	}
	if me == n-1 && out[0] != float64(n) {
		return fmt.Errorf("Reduce: got %v, want %d", out[0], n)
	}
	return mpi.Barrier(c)
}

// TestCollFailOneRank: a collective that fails at one rank only leaves the
// communicator usable, in shared memory and over point-to-point.
func TestCollFailOneRank(t *testing.T) {
	for _, shm := range []string{"1", "0"} {
		for _, np := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("shm=%s/np=%d", shm, np), func(t *testing.T) {
				job{np: np, cas: "coll-fail-one", timeout: 60 * time.Second,
					env: []string{"GORUN_COLL_SHM=" + shm, "GORUN_COLL_STALL=300ms"}}.ok(t)
			})
		}
	}
}

// caseFinalizeAfterMismatch: an erroneous program, rank 0 alone calls a
// collective (GORUN_CASE_CALL: allreduce, blocking; iallreduce, started
// and never waited for; dupallreduce, on a Dup of the world; dupfirst,
// the Dup's first call; badfirst, the same, rank 2 making it too with a
// receive buffer too short), or every rank but 1 calls Barrier
// (skipbarrier), then every rank calls Finalize; or a correct program
// (runahead, dupslow). Every rank prints the outcomes and exits 0.
func caseFinalizeAfterMismatch() int {
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "Init: %v\n", err)
		return 1
	}
	w := mpi.World()
	me := w.Rank()
	x := []int64{1}
	switch call := os.Getenv("GORUN_CASE_CALL"); {
	case call == "allreduce" && me == 0:
		err := mpi.Allreduce(w, x, x, mpi.Sum)
		fmt.Fprintf(os.Stderr, "rank 0: lone Allreduce: %v\n", err)
	case call == "iallreduce" && me == 0:
		if _, err := mpi.Iallreduce(w, x, x, mpi.Sum); err != nil {
			fmt.Fprintf(os.Stderr, "rank 0: Iallreduce: %v\n", err)
			return 1
		}
	case call == "skipbarrier" && me != 1:
		err := mpi.Barrier(w)
		fmt.Fprintf(os.Stderr, "rank %d: Barrier without rank 1: %v\n", me, err)
	case call == "runahead":
		// A correct program: rank 1, a leaf of every Reduce, sends and
		// runs far ahead, then finalizes while rank 0 still waits for
		// slow rank 2 in the first Reduce and asks about it.
		if me == 2 {
			time.Sleep(1500 * time.Millisecond)
		}
		for i := range 100 {
			y := []int64{0}
			if err := mpi.Reduce(w, x, y, mpi.Sum, 0); err != nil || me == 0 && y[0] != 3 {
				fmt.Fprintf(os.Stderr, "rank %d: Reduce %d: %v, %v\n", me, i, y, err)
				return 1
			}
		}
	case call == "dupallreduce" || call == "dupfirst":
		d, err := w.Dup()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: Dup: %v\n", me, err)
			return 1
		}
		// dupallreduce: a call at every rank first, so that the lone
		// call runs on a communicator that is set up; dupfirst: the
		// lone call is the communicator's first, and waits in its
		// set-up (the shared-memory segment's).
		if call == "dupallreduce" {
			if err := mpi.Allreduce(d, x, x, mpi.Sum); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: Allreduce on the Dup: %v\n", me, err)
				return 1
			}
		}
		if me == 0 {
			err := mpi.Allreduce(d, x, x, mpi.Sum)
			fmt.Fprintf(os.Stderr, "rank 0: lone Allreduce: %v\n", err)
		}
	case call == "badfirst":
		// Rank 2 joins rank 0's first call on the Dup with wrong
		// arguments, its abort of the call taken in at rank 0 after
		// rank 1's Finalize aborted it (rank 0 stopped meanwhile, so
		// that both notices wait for it): rank 0's set-up must still
		// fail on rank 1's abort. Rank 1's abort once lost its mark
		// under rank 2's, and rank 0 waited for ever.
		pid := []int64{int64(os.Getpid())}
		if err := mpi.Bcast(w, pid, 0); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: Bcast: %v\n", me, err)
			return 1
		}
		d, err := w.Dup()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: Dup: %v\n", me, err)
			return 1
		}
		switch me {
		case 0:
			err := mpi.Allreduce(d, x, x, mpi.Sum)
			fmt.Fprintf(os.Stderr, "rank 0: lone Allreduce: %v\n", err)
		case 1:
			time.Sleep(1800 * time.Millisecond)
		case 2:
			time.Sleep(time.Second)
			syscall.Kill(int(pid[0]), syscall.SIGSTOP)
			err := mpi.Allreduce(d, []int64{1, 2}, x, mpi.Sum)
			fmt.Fprintf(os.Stderr, "rank 2: Allreduce with a short buffer: %v\n", err)
			time.Sleep(time.Second)
			syscall.Kill(int(pid[0]), syscall.SIGCONT)
		}
	case call == "dupslow":
		// A correct program: rank 2 comes late to the Dup's first call,
		// after the others, waiting in its set-up, have asked about it.
		d, err := w.Dup()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: Dup: %v\n", me, err)
			return 1
		}
		if me == 2 {
			time.Sleep(1500 * time.Millisecond)
		}
		y := []int64{1}
		if err := mpi.Allreduce(d, y, y, mpi.Sum); err != nil || y[0] != 3 {
			fmt.Fprintf(os.Stderr, "rank %d: Allreduce on the Dup: %v, %v\n", me, y, err)
			return 1
		}
	}
	err := mpi.Finalize()
	fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", me, err)
	return 0
}

// TestFinalizeAfterMismatch: a collective that some ranks call and others
// do not, these calling Finalize instead, fails at the ones that called
// it, naming a rank that called Finalize (once they have waited
// GORUN_COLL_STALL and asked), and then every rank's Finalize succeeds.
// Finalize's barrier ran on the world's collective context: it matched
// the lone call, the other ranks finalized and exited, and the caller's
// Finalize waited for ranks that were gone (before the twenty-eighth
// session for ever; then it failed naming them), and a Barrier that one
// rank skipped returned nil at the others (matched by its Finalize).
// A nonblocking call started alone and never waited for does not hold
// Finalize. Over TCP alone the same, and on a Dup of the world (a
// finalizing rank answers every communicator's queries). A correct
// program where a rank runs ahead and finalizes while a slow one is still
// asked about a call the first has run is left alone (runahead); so is
// one where a rank comes late to a communicator's first call, whose
// set-up the others asked about (dupslow). A lone first call on a Dup
// fails in the call's set-up (dupfirst; it waited for ever).
func TestFinalizeAfterMismatch(t *testing.T) {
	for _, tc := range []struct {
		call, btl string
		lone      []string // the lines of the calls that must fail
	}{
		{"allreduce", "", []string{"rank 0: lone Allreduce:"}},
		{"iallreduce", "", nil},
		{"allreduce", "self,tcp", []string{"rank 0: lone Allreduce:"}},
		{"skipbarrier", "", []string{"rank 0: Barrier without rank 1:", "rank 2: Barrier without rank 1:"}},
		{"dupallreduce", "", []string{"rank 0: lone Allreduce:"}},
		{"dupfirst", "", []string{"rank 0: lone Allreduce:"}},
		{"badfirst", "", []string{"rank 0: lone Allreduce:"}},
		{"runahead", "", nil},
		{"dupslow", "", nil},
	} {
		t.Run(tc.call+"/"+tc.btl, func(t *testing.T) {
			env := []string{"GORUN_CASE_CALL=" + tc.call}
			if tc.btl != "" {
				env = append(env, "GORUN_BTL="+tc.btl)
			}
			switch tc.call {
			case "runahead":
				// Point-to-point algorithms (a leaf's sends run ahead)
				// and a short stall, so that rank 0 asks while rank 1
				// is in Finalize; the job must end well.
				env = append(env, "GORUN_COLL_SHM=0", "GORUN_COLL_STALL=300ms")
			case "dupslow", "badfirst":
				// A short stall, so that the set-up asks rank 2 before
				// it comes (and rank 1 before it finalizes).
				env = append(env, "GORUN_COLL_STALL=300ms")
			}
			r := job{np: 3, cas: "finalize-after-mismatch", env: env, timeout: 60 * time.Second}.ok(t)
			for _, lone := range tc.lone {
				if l := lastLine(r.stderr, lone); !strings.Contains(l, "called Finalize instead of this call") {
					t.Errorf("the call the others did not make should fail naming a rank that called Finalize; got %q\nstderr:\n%s", l, r.stderr)
				}
			}
			for rank := range 3 {
				if l := lastLine(r.stderr, fmt.Sprintf("rank %d: Finalize:", rank)); !strings.HasSuffix(l, "Finalize: <nil>") {
					t.Errorf("rank %d: %q\nstderr:\n%s", rank, l, r.stderr)
				}
			}
		})
	}
}

// lastLine returns the last line of out that begins with prefix, or "".
func lastLine(out, prefix string) string {
	l := ""
	for _, x := range strings.Split(out, "\n") {
		if strings.HasPrefix(x, prefix) {
			l = x
		}
	}
	return l
}

func init() { rankCases["barrier-vs-allreduce"] = caseBarrierVsAllreduce }

// caseBarrierVsAllreduce: an erroneous program, rank 0 calls Barrier where
// the others call Allreduce (GORUN_CASE_CALL: first, as the world's first
// call; later, after one that every rank makes). Every rank prints what
// its call returned.
func caseBarrierVsAllreduce(w *mpi.Comm) error {
	x := []int64{1}
	if os.Getenv("GORUN_CASE_CALL") == "later" {
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
			return fmt.Errorf("first Allreduce: %v", err)
		}
	}
	var err error
	if w.Rank() == 0 {
		err = mpi.Barrier(w)
	} else {
		err = mpi.Allreduce(w, x, x, mpi.Sum)
	}
	fmt.Printf("rank %d: returned: %v\n", w.Rank(), err)
	return nil
}

// TestBarrierVsAllreduce: where rank 0 calls Barrier and the others
// Allreduce, every rank's call fails (found by a walkthrough: rank 0's
// Barrier returned nil, the shared-memory barrier content with every
// rank's entry, and only the others failed, on a "count" mismatch).
func TestBarrierVsAllreduce(t *testing.T) {
	for _, when := range []string{"first", "later"} {
		t.Run(when, func(t *testing.T) {
			r := job{np: 3, cas: "barrier-vs-allreduce", env: []string{"GORUN_CASE_CALL=" + when}, timeout: 60 * time.Second}.ok(t)
			for rank := range 3 {
				l := lastLine(r.stdout, fmt.Sprintf("rank %d: returned:", rank))
				if l == "" || strings.HasSuffix(l, "<nil>") || !strings.Contains(l, "different collectives") {
					t.Errorf("rank %d: %q, want a failure naming different collectives\nstdout:\n%s", rank, l, r.stdout)
				}
			}
		})
	}
}

func init() { rawCases["finalize-deferred-panic"] = caseFinalizeDeferredPanic }

// caseFinalizeDeferredPanic: Finalize deferred, as the docs show, and
// rank 1 panics while the others call GORUN_CASE_CALL with it (recv from
// rank 1, barrier, allreduce; not a Bcast: one from rank 0 completes
// without rank 1, and one from rank 1 ended with the panic before the
// change too, once the stall check had failed Finalize's barrier). Each other rank prints
// what its call returned: never nil, and never a mismatch.
func caseFinalizeDeferredPanic() int {
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "Init: %v\n", err)
		return 1
	}
	defer mpi.Finalize()
	w := mpi.World()
	if w.Rank() == 1 {
		panic("boom at rank 1")
	}
	x := []int64{1}
	var err error
	switch os.Getenv("GORUN_CASE_CALL") {
	case "recv":
		_, err = mpi.Recv(w, x, 1, 0)
	case "barrier":
		err = mpi.Barrier(w)
	case "allreduce":
		err = mpi.Allreduce(w, x, x, mpi.Sum)
	}
	fmt.Printf("rank %d: %s returned: %v\n", w.Rank(), os.Getenv("GORUN_CASE_CALL"), err)
	return 0
}

// TestFinalizeDeferredPanic: a rank that panics with Finalize deferred
// ends the job with the panic's status and message, as without the
// defer; the others' calls with it never succeed (one may fail, its
// peer gone, before gorun stops the job). Before Finalize let the panic
// go on, its barrier ran at the panicking rank: the job hung in Recv
// without the message, Barrier returned nil at the others, Allreduce
// failed with mismatched counts. Since Finalize's barrier is its own
// (coll.FinalizeBarrier), barrier and allreduce end well without the
// recover too, after the stall check's 2 s; recv still needs it.
func TestFinalizeDeferredPanic(t *testing.T) {
	for _, call := range []string{"recv", "barrier", "allreduce"} {
		t.Run(call, func(t *testing.T) {
			r := job{np: 3, cas: "finalize-deferred-panic", env: []string{"GORUN_CASE_CALL=" + call}, timeout: 60 * time.Second}.run(t)
			// A call may fail because rank 1 has exited (the launcher's
			// teardown and a rank's own failure detection race), but
			// it must not succeed or blame a mismatch.
			if r.code != 2 || !strings.Contains(r.stderr, "panic: boom at rank 1") || strings.Contains(r.stdout, "returned: <nil>") || strings.Contains(r.stdout, "mismatch") {
				t.Errorf("exit %d (want 2, rank 1's panic)\nstdout:\n%s\nstderr:\n%.2000s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
