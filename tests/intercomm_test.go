package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: Comm.CreateGroup and intercommunicators (IntercommCreate,
// Merge, point-to-point and collectives across the two groups), each
// against a result computed sequentially, and the intercommunicator
// program against its C twin under Open MPI (tests/openmpi/intercomm.c).

func init() {
	rankCases["intercomm-ref"] = caseIntercommRef
	rankCases["intercomm"] = caseIntercomm
	rankCases["creategroup"] = caseCreateGroup
}

// evenOdd splits w into its even and odd ranks and joins the two by an
// intercommunicator (leaders: world ranks 0 and 1, tag 99).
func evenOdd(w *mpi.Comm) (local, inter *mpi.Comm, err error) {
	color := w.Rank() % 2
	if local, err = w.Split(color, w.Rank()); err != nil {
		return nil, nil, err
	}
	inter, err = local.IntercommCreate(0, w, 1-color, 99)
	return local, inter, err
}

// caseIntercommRef is tests/openmpi/intercomm.c in Go.
func caseIntercommRef(w *mpi.Comm) error {
	rank := w.Rank()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	lrank, rsize := local.Rank(), inter.RemoteSize()

	mine := []int64{int64(rank)}
	var reqs []*mpi.Request
	for j := range rsize {
		q, err := mpi.Isend(inter, mine, j, 5)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	var p2p int64
	got := []int64{0}
	for j := range rsize {
		st, err := mpi.Recv(inter, got, j, 5)
		if err != nil {
			return err
		}
		if st.Source != j {
			return fmt.Errorf("receive from remote rank %d: status source %d", j, st.Source)
		}
		p2p += int64(j+1) * got[0]
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}

	b := []int32{-1, -1}
	if color == 0 {
		root := mpi.ProcNull
		if lrank == 0 {
			b[0], b[1], root = 42, 43, mpi.Root
		}
		err = mpi.Bcast(inter, b, root)
	} else {
		err = mpi.Bcast(inter, b, 0)
	}
	if err != nil {
		return err
	}

	s, r := []int64{int64(rank), int64(rank * rank)}, make([]int64, 2)
	if err := mpi.Allreduce(inter, s, r, mpi.Sum); err != nil {
		return err
	}

	scount, rcount := 1, 2
	if color == 1 {
		scount, rcount = 2, 1
	}
	gs := []int32{int32(rank * 10), int32(rank*10 + 1)}
	gr := make([]int32, rsize*rcount)
	if err := mpi.Allgather(inter, gs[:scount], gr); err != nil {
		return err
	}

	merged, err := inter.Merge(color == 0)
	if err != nil {
		return err
	}
	mrank := merged.Rank()
	msum := []int64{int64(rank+1) * int64(mrank+1)}
	if err := mpi.Allreduce(merged, msum, msum, mpi.Sum); err != nil {
		return err
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "rank %d: color %d lrank %d rsize %d p2p %d bcast %d %d allreduce %d %d allgather",
		rank, color, lrank, rsize, p2p, b[0], b[1], r[0], r[1])
	for _, v := range gr {
		fmt.Fprintf(&sb, " %d", v)
	}
	fmt.Fprintf(&sb, " merged %d sum %d", mrank, msum[0])
	lines, err := mpi.GatherObj(w, sb.String(), 0)
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	for _, c := range []*mpi.Comm{merged, inter, local} {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// intercommSequential computes caseIntercommRef's output in one process.
func intercommSequential(n int) string {
	group := func(color int) []int { // world ranks of a group, in its order
		var g []int
		for r := color; r < n; r += 2 {
			g = append(g, r)
		}
		return g
	}
	// Merge with the even group high: the odd group first.
	mergedOrder := slices.Concat(group(1), group(0))
	var msum int64
	for m, r := range mergedOrder {
		msum += int64(r+1) * int64(m+1)
	}
	var sb strings.Builder
	for rank := range n {
		color := rank % 2
		remote := group(1 - color)
		var p2p, s0, s1 int64
		for j, x := range remote {
			p2p += int64(j+1) * int64(x)
			s0 += int64(x)
			s1 += int64(x * x)
		}
		b := [2]int{42, 43}
		if color == 0 && rank != 0 {
			b = [2]int{-1, -1}
		}
		fmt.Fprintf(&sb, "rank %d: color %d lrank %d rsize %d p2p %d bcast %d %d allreduce %d %d allgather",
			rank, color, rank/2, len(remote), p2p, b[0], b[1], s0, s1)
		for _, x := range remote {
			fmt.Fprintf(&sb, " %d", x*10)
			if color == 0 { // the odd group sends two each
				fmt.Fprintf(&sb, " %d", x*10+1)
			}
		}
		fmt.Fprintf(&sb, " merged %d sum %d\n", slices.Index(mergedOrder, rank), msum)
	}
	return sb.String()
}

// TestIntercommAgainstOpenMPI: the intercommunicator program gives the
// lines a sequential computation gives, over shared memory and TCP, and
// the lines its C twin gives under Open MPI.
func TestIntercommAgainstOpenMPI(t *testing.T) {
	for _, np := range []int{2, 5, 6} {
		for _, btl := range []string{"sm,self", "tcp,self"} {
			t.Run(fmt.Sprintf("np=%d/btl=%s", np, btl), func(t *testing.T) {
				got := job{np: np, cas: "intercomm-ref", env: []string{"GORUN_BTL=" + btl}}.ok(t).stdout
				if seq := intercommSequential(np); got != seq {
					t.Fatalf("gorun:\n%s\nsequential:\n%s", got, seq)
				}
			})
		}
		t.Run(fmt.Sprintf("np=%d/openmpi", np), func(t *testing.T) {
			want := mpirun(t, np, filepath.Join(openmpi(t), "intercomm"))
			if seq := intercommSequential(np); want != seq {
				t.Fatalf("Open MPI:\n%s\nsequential:\n%s", want, seq)
			}
		})
	}
}

// caseIntercomm: the rest of the intercommunicator's API on the even/odd
// split. AnySource names remote ranks; a Bcast from the odd group; an
// Allreduce in place and with Max; groups and sizes; Merge with both
// groups low (the group of world rank 0 first); collectives and
// constructors that take an intracommunicator fail with ErrComm at every
// process without a collective begun, so the intercommunicator still
// works afterwards; a Bcast root outside the remote group fails with
// ErrRoot everywhere; CommCompare compares both groups. Revoke is not
// tried (it needs --enable-recovery).
func caseIntercomm(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	rsize := inter.RemoteSize()
	if !inter.IsInter() || local.IsInter() || inter.Size() != local.Size() || local.RemoteSize() != 0 {
		return fmt.Errorf("IsInter %v/%v, Size %d (local %d), RemoteSize of the local communicator %d",
			inter.IsInter(), local.IsInter(), inter.Size(), local.Size(), local.RemoteSize())
	}
	wg, _ := w.Group()
	rg, err := inter.RemoteGroup()
	if err != nil {
		return err
	}
	tr, err := mpi.GroupTranslateRanks(rg, seq(rsize), wg)
	if err != nil {
		return err
	}
	for j, x := range tr {
		if x != 2*j+1-color {
			return fmt.Errorf("remote group in world ranks %v", tr)
		}
	}
	if _, err := local.RemoteGroup(); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("RemoteGroup of an intracommunicator: %v, want ErrComm", err)
	}

	// AnySource: remote rank j sends j+100 to every local rank.
	var reqs []*mpi.Request
	for j := range rsize {
		q, err := mpi.Isend(inter, []int{local.Rank() + 100}, j, 8)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	seen := make([]bool, rsize)
	for range rsize {
		v := []int{0}
		st, err := mpi.Recv(inter, v, mpi.AnySource, 8)
		if err != nil {
			return err
		}
		if st.Source < 0 || st.Source >= rsize || v[0] != st.Source+100 || seen[st.Source] {
			return fmt.Errorf("AnySource receive: status %+v, value %d", st, v[0])
		}
		seen[st.Source] = true
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	if err := mpi.Send(inter, []int{1}, rsize, 0); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Send to remote rank %d of %d: %v, want ErrRank", rsize, rsize, err)
	}

	// Bcast of 3000 float64 from the odd group's last rank.
	oddN := n / 2
	buf := make([]float64, 3000)
	root := oddN - 1
	if color == 1 {
		root = mpi.ProcNull
		if local.Rank() == oddN-1 {
			root = mpi.Root
			for i := range buf {
				buf[i] = float64(i) / 3
			}
		}
	}
	if err := mpi.Bcast(inter, buf, root); err != nil {
		return err
	}
	for i := range buf {
		want := float64(i) / 3
		if color == 1 && root == mpi.ProcNull {
			want = 0
		}
		if buf[i] != want {
			return fmt.Errorf("Bcast from the odd group: element %d is %v, want %v", i, buf[i], want)
		}
	}

	// Allreduce in place with Max: the remote group's largest world rank.
	x := []int{rank, -rank}
	if err := mpi.Allreduce(inter, x, x, mpi.Max); err != nil {
		return err
	}
	if want := tr[rsize-1]; x[0] != want || x[1] != -tr[0] {
		return fmt.Errorf("Allreduce(Max) in place: %v, want [%d %d]", x, want, -tr[0])
	}
	if err := mpi.Barrier(inter); err != nil {
		return err
	}

	// What an intercommunicator does not take: refused here, before any
	// collective starts, at every process.
	for name, f := range map[string]func() error{
		"Scan":       func() error { return mpi.Scan(inter, x, x, mpi.Sum) },
		"Ibarrier":   func() error { _, err := mpi.Ibarrier(inter); return err },
		"Exscan":     func() error { return mpi.Exscan(inter, x, x, mpi.Sum) },
		"Split":      func() error { _, err := inter.Split(0, 0); return err },
		"Dup":        func() error { _, err := inter.Dup(); return err },
		"Create":     func() error { _, err := inter.Create(wg); return err },
		"CartCreate": func() error { _, err := mpi.CartCreate(inter, []int{1}, []bool{false}, false); return err },
	} {
		if err := f(); !errors.Is(err, mpi.ErrComm) {
			return fmt.Errorf("%s on an intercommunicator: %v, want ErrComm", name, err)
		}
	}
	if _, err := inter.IntercommCreate(0, w, 0, 1); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("IntercommCreate over an intercommunicator: %v, want ErrComm", err)
	}
	if _, err := local.Merge(false); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("Merge of an intracommunicator: %v, want ErrComm", err)
	}
	// A root that is not in the remote group: ErrRoot here, and the
	// others' calls are aborted.
	bad := 0
	if color == 0 {
		bad = rsize + 1
	}
	if err := mpi.Bcast(inter, x, bad); err == nil {
		return fmt.Errorf("Bcast with root %d (remote size %d) succeeded", bad, rsize)
	} else if color == 0 && !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("Bcast with root %d (remote size %d): %v, want ErrRoot", bad, rsize, err)
	}

	// A second intercommunicator of the same groups is congruent.
	inter2, err := local.IntercommCreate(0, w, 1-color, 98)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		a, b *mpi.Comm
		want mpi.Comparison
	}{{inter, inter, mpi.Ident}, {inter, inter2, mpi.Congruent}, {inter, local, mpi.Unequal}} {
		if got, err := mpi.CommCompare(c.a, c.b); got != c.want || err != nil {
			return fmt.Errorf("CommCompare(%s, %s): %v %v, want %v", c.a.Name(), c.b.Name(), got, err, c.want)
		}
	}
	if err := inter2.Free(); err != nil {
		return err
	}

	// Both low: the group of world rank 0 (the even one) first.
	m, err := inter.Merge(false)
	if err != nil {
		return err
	}
	wantRank := rank / 2
	if color == 1 {
		wantRank = (n+1)/2 + rank/2
	}
	if m.Rank() != wantRank || m.Size() != n || m.IsInter() {
		return fmt.Errorf("Merge(false): rank %d size %d, want rank %d size %d", m.Rank(), m.Size(), wantRank, n)
	}
	all := make([]int, n)
	if err := mpi.Allgather(m, []int{rank}, all); err != nil {
		return err
	}
	for i, r := range all {
		want := 2 * i
		if i >= (n+1)/2 {
			want = 2*(i-(n+1)/2) + 1
		}
		if r != want {
			return fmt.Errorf("merged communicator in world ranks %v", all)
		}
	}
	for _, c := range []*mpi.Comm{m, inter, local} {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return mpi.Barrier(w)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestIntercomm(t *testing.T) {
	for _, np := range []int{2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercomm"}.ok(t) })
	}
}

// caseCreateGroup: from two goroutines at once, every process makes the
// communicators of the overlapping groups it belongs to: A, the world's
// ranks in reverse order, and B, every rank but the last, with other
// tags; the last rank, outside B, meanwhile makes only A. Each new
// communicator's ranks follow its group's order, and an Allreduce and a
// ring of messages over it give the sums computed here. A process
// outside the group gets nil without communicating; a bad tag or group
// fails at once.
func caseCreateGroup(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	wg, _ := w.Group()
	rev := make([]int, n)
	for i := range rev {
		rev[i] = n - 1 - i
	}
	ga, err := wg.Incl(rev)
	if err != nil {
		return err
	}
	gb, err := wg.Excl([]int{n - 1})
	if err != nil {
		return err
	}
	check := func(c *mpi.Comm, order []int, what string) error {
		if c == nil {
			return fmt.Errorf("%s: nil communicator for a member", what)
		}
		if want := slices.Index(order, rank); c.Rank() != want || c.Size() != len(order) {
			return fmt.Errorf("%s: rank %d of %d, want %d of %d", what, c.Rank(), c.Size(), want, len(order))
		}
		s := []int{rank}
		if err := mpi.Allreduce(c, s, s, mpi.Sum); err != nil {
			return err
		}
		want := 0
		for _, r := range order {
			want += r
		}
		if s[0] != want {
			return fmt.Errorf("%s: Allreduce gives %d, want %d", what, s[0], want)
		}
		k := c.Size()
		got := []int{0}
		st, err := mpi.Sendrecv(c, []int{rank}, (c.Rank()+1)%k, 3, got, (c.Rank()-1+k)%k, 3)
		if err != nil {
			return err
		}
		if prev := order[(c.Rank()-1+k)%k]; got[0] != prev || st.Source != (c.Rank()-1+k)%k {
			return fmt.Errorf("%s: ring gives %d from %d, want %d", what, got[0], st.Source, prev)
		}
		return c.Free()
	}
	var wgp sync.WaitGroup
	errs := make([]error, 2)
	for i := range 3 { // three rounds, new tags each
		wgp.Add(2)
		go func() {
			defer wgp.Done()
			c, err := w.CreateGroup(ga, 10+i)
			if err == nil {
				err = check(c, rev, "group A")
			}
			errs[0] = errors.Join(errs[0], err)
		}()
		go func() {
			defer wgp.Done()
			c, err := w.CreateGroup(gb, mpi.TagUB-i)
			if err == nil && rank == n-1 && c != nil {
				err = fmt.Errorf("group B: a communicator for the process outside it")
			} else if err == nil && rank != n-1 {
				err = check(c, seq(n-1), "group B")
			}
			errs[1] = errors.Join(errs[1], err)
		}()
		wgp.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, err := w.CreateGroup(ga, -1); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("CreateGroup with tag -1: %v, want ErrTag", err)
	}
	if _, err := w.CreateGroup(nil, 0); !errors.Is(err, mpi.ErrGroup) {
		return fmt.Errorf("CreateGroup(nil): %v, want ErrGroup", err)
	}
	return mpi.Barrier(w)
}

func TestCreateGroup(t *testing.T) {
	for _, np := range []int{1, 3, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "creategroup"}.ok(t) })
	}
}
