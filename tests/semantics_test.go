package tests

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// MPI semantics of corner arguments (issue 15, items 2 and 5).

func init() {
	rankCases["probe-procnull"] = caseProbeProcNull
	rankCases["zero-op"] = caseZeroOp
	rankCases["splittype-undefined"] = caseSplitTypeUndefined
	rankCases["corner-args"] = caseCornerArgs
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

// caseCornerArgs: arguments found wrong or mishandled by a review against
// Open MPI (sixteenth session). Sendrecv with overlapping buffers sends
// what the buffer held at the call (the receive, posted first, overwrote
// the data still to be sent: half of 100,000 elements came back wrong); Split sorts keys of
// the whole int range (a difference overflowed); a bad color at one rank
// fails Split at every rank (the others were left in an Allgather the bad
// rank never joined, then hung in Finalize); Bsend to ProcNull needs no
// buffer; a bad tag is refused with ProcNull too; CommCompare refuses a
// freed communicator; Count of a partial element is Undefined (it was
// rounded down). np 4.
func caseCornerArgs(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	next, prev := (me+1)%n, (me-1+n)%n
	// One buffer for both, at a rendezvous size and an eager one, and two
	// overlapping parts of one array: what is sent is the buffer as it
	// was at the call.
	for _, size := range []int{100000, 10} {
		buf := make([]int32, size)
		for i := range buf {
			buf[i] = int32(me*1000000 + i)
		}
		if _, err := mpi.Sendrecv(w, buf, next, 1, buf, prev, 1); err != nil {
			return fmt.Errorf("Sendrecv of %d elements with one buffer for both: %v", size, err)
		}
		for i, v := range buf {
			if v != int32(prev*1000000+i) {
				return fmt.Errorf("Sendrecv of %d elements with one buffer for both: element %d is %d, want %d", size, i, v, prev*1000000+i)
			}
		}
	}
	buf := make([]int32, 20)
	for i := range buf {
		buf[i] = int32(me*100 + i)
	}
	if _, err := mpi.Sendrecv(w, buf[:10], next, 2, buf[5:15], prev, 2); err != nil {
		return fmt.Errorf("Sendrecv with overlapping buffers: %v", err)
	}
	for i := range 10 {
		if buf[5+i] != int32(prev*100+i) {
			return fmt.Errorf("Sendrecv with overlapping buffers: element %d is %d, want %d", i, buf[5+i], prev*100+i)
		}
	}

	// Three bytes into float64s: no whole number of elements.
	st, err := mpi.Sendrecv(w, []byte{1, 2, 3}, next, 3, make([]float64, 2), prev, 3)
	if err != nil {
		return err
	}
	if st.Count() != mpi.Undefined || mpi.GetCount[float64](st) != mpi.Undefined || mpi.GetCount[byte](st) != 3 {
		return fmt.Errorf("3 bytes into float64s: Count %d, GetCount[float64] %d, GetCount[byte] %d; want Undefined, Undefined, 3", st.Count(), mpi.GetCount[float64](st), mpi.GetCount[byte](st))
	}

	// MPI's empty status for a nil request and an inactive persistent
	// one (they read as a message of rank 0 with tag 0).
	idle, err := mpi.RecvInit(w, make([]int, 1), prev, 4)
	if err != nil {
		return err
	}
	for what, q := range map[string]*mpi.Request{"nil": nil, "persistent not started": idle} {
		st, err := q.Wait()
		if err != nil || st.Source != mpi.AnySource || st.Tag != mpi.AnyTag || st.Bytes() != 0 {
			return fmt.Errorf("Wait of a %s request: %+v %v, want MPI's empty status", what, st, err)
		}
		if ok, st, err := q.Test(); !ok || err != nil || st.Source != mpi.AnySource || st.Tag != mpi.AnyTag {
			return fmt.Errorf("Test of a %s request: %v %+v %v, want MPI's empty status", what, ok, st, err)
		}
	}
	if err := idle.Free(); err != nil {
		return err
	}

	keys := []int{math.MaxInt, -1, math.MinInt, 0}
	c, err := w.Split(0, keys[me%len(keys)]*(1+me/len(keys)))
	if err != nil {
		return err
	}
	want := 0 // this rank's place among the keys, ranks breaking ties
	for r := range n {
		kr, km := keys[r%len(keys)]*(1+r/len(keys)), keys[me%len(keys)]*(1+me/len(keys))
		if kr < km || kr == km && r < me {
			want++
		}
	}
	if c.Rank() != want {
		return fmt.Errorf("Split with key %d: rank %d, want %d", keys[me%len(keys)], c.Rank(), want)
	}

	color := 0
	if me == 1 {
		color = -5
	}
	if bad, err := w.Split(color, 0); !errors.Is(err, mpi.ErrArg) || bad != nil {
		return fmt.Errorf("Split with a bad color at rank 1: %v, %v; want ErrArg at every rank", bad, err)
	}

	if err := mpi.Bsend(w, []int{1}, mpi.ProcNull, 0); err != nil {
		return fmt.Errorf("Bsend to ProcNull with no buffer attached: %v", err)
	}
	if q, err := mpi.Ibsend(w, []int{1}, mpi.ProcNull, 0); err != nil || q == nil {
		return fmt.Errorf("Ibsend to ProcNull with no buffer attached: %v", err)
	}
	if err := mpi.Bsend(w, []int{1}, mpi.ProcNull, -5); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("Bsend to ProcNull with tag -5: %v, want ErrTag", err)
	}
	x := []int{0}
	if err := mpi.Send(w, x, mpi.ProcNull, -5); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("Send to ProcNull with tag -5: %v, want ErrTag", err)
	}
	if _, err := mpi.Recv(w, x, mpi.ProcNull, -5); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("Recv from ProcNull with tag -5: %v, want ErrTag", err)
	}
	if _, err := mpi.Recv(w, x, mpi.ProcNull, mpi.AnyTag); err != nil {
		return fmt.Errorf("Recv from ProcNull with AnyTag: %v", err)
	}
	if _, err := mpi.Sendrecv(w, x, mpi.ProcNull, -7, []int{0}, mpi.ProcNull, 1); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("Sendrecv to ProcNull with tag -7: %v, want ErrTag", err)
	}

	d, err := w.Dup()
	if err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	if _, err := mpi.CommCompare(d, w); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("CommCompare of a freed communicator: %v, want ErrComm", err)
	}
	return mpi.Barrier(w)
}

func TestCornerArgs(t *testing.T) { job{np: 4, cas: "corner-args"}.ok(t) }
