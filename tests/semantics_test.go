package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// MPI semantics of corner arguments (issue 15, items 2 and 5).

func init() {
	rankCases["probe-procnull"] = caseProbeProcNull
	rankCases["zero-op"] = caseZeroOp
	rankCases["splittype-undefined"] = caseSplitTypeUndefined
}

// caseSplitTypeUndefined (issue 15, item 2): rank 1 passes Undefined to
// SplitType and gets nil; the others get their host's communicator without
// rank 1; a collective on it and Finalize then work.
func caseSplitTypeUndefined(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	kind := mpi.SplitShared
	if me == 1 {
		kind = mpi.SplitKind(mpi.Undefined)
	}
	c, err := w.SplitType(kind, 0)
	if err != nil {
		return err
	}
	if me == 1 {
		if c != nil {
			return fmt.Errorf("rank 1 passed Undefined and got a communicator of %d", c.Size())
		}
		return nil
	}
	if c == nil || c.Size() != n-1 {
		return fmt.Errorf("rank %d: communicator %v, want one of the %d ranks other than rank 1", me, c, n-1)
	}
	x := []int{me}
	if err := mpi.Allreduce(c, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2-1 {
		return fmt.Errorf("rank %d: Allreduce on the split: %v %v", me, x, err)
	}
	return nil
}

func TestSplitTypeUndefined(t *testing.T) { job{np: 3, cas: "splittype-undefined"}.ok(t) }

// caseProbeProcNull: Probe and Iprobe from ProcNull complete at once with
// source ProcNull, tag AnyTag and count 0, whatever the tag asked for, and
// a message waiting from a real peer is not reported instead.
func caseProbeProcNull(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	// A message waits at every rank, so that a probe that looked at real
	// peers would find one.
	r, err := mpi.Isend(w, []int{me}, (me+1)%n, 7)
	if err != nil {
		return err
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	want := func(what string, st mpi.Status) error {
		if st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || st.Count() != 0 || st.Bytes() != 0 {
			return fmt.Errorf("%s: status %+v (count %d), want source ProcNull, tag AnyTag, count 0", what, st, st.Count())
		}
		return nil
	}
	for _, tag := range []int{mpi.AnyTag, 7} {
		ok, st, err := mpi.Iprobe(w, mpi.ProcNull, tag)
		if err != nil || !ok {
			return fmt.Errorf("Iprobe(ProcNull, %d): flag %v, %v; want true, nil", tag, ok, err)
		}
		if err := want(fmt.Sprintf("Iprobe(ProcNull, %d)", tag), st); err != nil {
			return err
		}
		st, err = mpi.Probe(w, mpi.ProcNull, tag)
		if err != nil {
			return fmt.Errorf("Probe(ProcNull, %d): %v", tag, err)
		}
		if err := want(fmt.Sprintf("Probe(ProcNull, %d)", tag), st); err != nil {
			return err
		}
	}
	// An invalid tag is still an error.
	if _, _, err := mpi.Iprobe(w, mpi.ProcNull, -5); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("Iprobe(ProcNull, -5): want ErrTag, got %v", err)
	}
	got := []int{-1}
	if _, err := mpi.Recv(w, got, (me+n-1)%n, 7); err != nil || got[0] != (me+n-1)%n {
		return fmt.Errorf("Recv after the probes: %v %v", got, err)
	}
	_, err = r.Wait()
	return err
}

func TestProbeProcNull(t *testing.T) { job{np: 2, cas: "probe-procnull"}.ok(t) }

// caseZeroOp: every call that takes an Op fails with ErrOp on the zero
// Op{}, and on a user op made with a nil function, at every rank, and the
// communicator works afterwards.
func caseZeroOp(w *mpi.Comm) error {
	for _, zero := range []mpi.Op{{}, mpi.NewOp[int]("nil", nil, true)} {
		if err := badOpCalls(w, zero); err != nil {
			return err
		}
	}
	me, n := w.Rank(), w.Size()
	s := []int{me}
	if err := mpi.Allreduce(w, s, s, mpi.Sum); err != nil || s[0] != n*(n-1)/2 {
		return fmt.Errorf("Allreduce after the bad-Op calls: %v %v", s, err)
	}
	return nil
}

// badOpCalls runs every call that takes an Op with zero and wants ErrOp.
func badOpCalls(w *mpi.Comm, zero mpi.Op) error {
	me, n := w.Rank(), w.Size()
	x, y := []int{me + 1, 2}, make([]int, 2)
	blocks := make([]int, n)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 1
	}
	wait := func(q *mpi.Request, err error) error {
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	}
	calls := []struct {
		name string
		f    func() error
	}{
		{"Reduce", func() error { return mpi.Reduce(w, x, y, zero, 0) }},
		{"Allreduce", func() error { return mpi.Allreduce(w, x, y, zero) }},
		{"Allreduce in place", func() error { return mpi.Allreduce(w, y, y, zero) }},
		{"Scan", func() error { return mpi.Scan(w, x, y, zero) }},
		{"Exscan", func() error { return mpi.Exscan(w, x, y, zero) }},
		{"ReduceScatter", func() error { return mpi.ReduceScatter(w, blocks, y, counts, zero) }},
		{"ReduceScatterBlock", func() error { return mpi.ReduceScatterBlock(w, blocks, y, zero) }},
		{"Ireduce", func() error { return wait(mpi.Ireduce(w, x, y, zero, 0)) }},
		{"Iallreduce", func() error { return wait(mpi.Iallreduce(w, x, y, zero)) }},
		{"Iscan", func() error { return wait(mpi.Iscan(w, x, y, zero)) }},
		{"Iexscan", func() error { return wait(mpi.Iexscan(w, x, y, zero)) }},
		{"IreduceScatter", func() error { return wait(mpi.IreduceScatter(w, blocks, y, counts, zero)) }},
		{"IreduceScatterBlock", func() error { return wait(mpi.IreduceScatterBlock(w, blocks, y, zero)) }},
	}
	for _, c := range calls {
		if err := c.f(); !errors.Is(err, mpi.ErrOp) {
			return fmt.Errorf("%s with op %q: want ErrOp, got %v", c.name, zero, err)
		}
	}
	return nil
}

func TestZeroOp(t *testing.T) { job{np: 2, cas: "zero-op"}.ok(t) }
