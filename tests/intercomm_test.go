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
// Merge, Dup, Idup, Split and Create of an intercommunicator,
// point-to-point and collectives across the two groups), each
// against a result computed sequentially, and the intercommunicator
// program against its C twin under Open MPI (tests/openmpi/intercomm.c).

func init() {
	rankCases["intercomm-ref"] = caseIntercommRef
	rankCases["intercomm"] = caseIntercomm
	rankCases["creategroup"] = caseCreateGroup
	rankCases["creategroup-ub"] = caseCreateGroupUB
	rankCases["intercomm-ctor"] = caseIntercommCtor
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

	vs := make([]int32, rank%3+1)
	for i := range vs {
		vs[i] = int32(rank*10 + i)
	}
	vc, vd, vn := make([]int, rsize), make([]int, rsize), 0
	for j := range rsize {
		vc[j], vd[j] = (2*j+1-color)%3+1, vn
		vn += vc[j]
	}
	vr := make([]int32, vn)
	if err := mpi.Allgatherv(inter, vs, vr, vc, vd); err != nil {
		return err
	}

	rs, rr := make([]int64, local.Size()*rsize), make([]int64, rsize)
	for e := range rs {
		rs[e] = int64(rank*100 + e)
	}
	if err := mpi.ReduceScatterBlock(inter, rs, rr, mpi.Sum); err != nil {
		return err
	}

	split := " split null"
	sp, err := inter.Split((rank/4)%2, -rank)
	if err != nil {
		return err
	}
	if sp != nil {
		ssum := []int64{int64(rank)}
		if err := mpi.Allreduce(sp, ssum, ssum, mpi.Sum); err != nil {
			return err
		}
		split = fmt.Sprintf(" split %d %d %d", sp.Rank(), sp.RemoteSize(), ssum[0])
		if err := sp.Free(); err != nil {
			return err
		}
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
	sb.WriteString(" allgatherv")
	for _, v := range vr {
		fmt.Fprintf(&sb, " %d", v)
	}
	sb.WriteString(" rsb")
	for _, v := range rr {
		fmt.Fprintf(&sb, " %d", v)
	}
	sb.WriteString(split)
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
		sb.WriteString(" allgatherv")
		for _, x := range remote {
			for i := range x%3 + 1 {
				fmt.Fprintf(&sb, " %d", x*10+i)
			}
		}
		// Reduce_scatter_block: this process's rsize elements of the
		// sum over the remote group of x*100+e.
		sb.WriteString(" rsb")
		lrank := rank / 2
		for i := range len(remote) {
			e, v := lrank*len(remote)+i, 0
			for _, x := range remote {
				v += x*100 + e
			}
			fmt.Fprintf(&sb, " %d", v)
		}
		// Split with color (r/4)%2 and key -r: the groups in
		// decreasing world rank; nil when the other group lacks the
		// color.
		of := func(g []int) []int {
			var s []int
			for _, x := range slices.Backward(g) {
				if (x/4)%2 == (rank/4)%2 {
					s = append(s, x)
				}
			}
			return s
		}
		if sl, sr := of(group(color)), of(remote); len(sr) == 0 {
			sb.WriteString(" split null")
		} else {
			sum := 0
			for _, x := range sr {
				sum += x
			}
			fmt.Fprintf(&sb, " split %d %d %d", slices.Index(sl, rank), len(sr), sum)
		}
		fmt.Fprintf(&sb, " merged %d sum %d\n", slices.Index(mergedOrder, rank), msum)
	}
	return sb.String()
}

// TestIntercommAgainstOpenMPI: the intercommunicator program (among its
// calls Allgatherv, Reduce_scatter_block and Split on the
// intercommunicator) gives the lines a sequential computation gives, over
// shared memory and TCP, and the lines its C twin gives under Open MPI.
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
// constructors that take an intracommunicator (Scan, SplitType,
// CreateGroup, the topologies) fail with ErrComm at every
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
		"Scan":        func() error { return mpi.Scan(inter, x, x, mpi.Sum) },
		"Iscan":       func() error { _, err := mpi.Iscan(inter, x, x, mpi.Sum); return err },
		"Exscan":      func() error { return mpi.Exscan(inter, x, x, mpi.Sum) },
		"ScanInit":    func() error { _, err := mpi.ScanInit(inter, x, x, mpi.Sum); return err },
		"SplitType":   func() error { _, err := inter.SplitType(mpi.SplitShared, 0); return err },
		"CreateGroup": func() error { _, err := inter.CreateGroup(wg, 0); return err },
		"CartCreate":  func() error { _, err := mpi.CartCreate(inter, []int{1}, []bool{false}, false); return err },
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

// caseIntercommCtor: Dup, Idup, Split and Create of the even/odd
// intercommunicator. Each new intercommunicator's groups (in world ranks
// and in order), its rank, an Allreduce and a point-to-point exchange
// across it are checked against the groups computed here from world
// ranks; the duplicates' messages do not mix with the original's. A bad
// color or group fails the calls of both groups (the other through the
// abort), and the intercommunicator still works afterwards.
func caseIntercommCtor(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	wg, _ := w.Group()
	group := func(c int) []int { // world ranks of the even (0) or odd (1) group
		var g []int
		for r := c; r < n; r += 2 {
			g = append(g, r)
		}
		return g
	}
	check := func(what string, c *mpi.Comm, localW, remoteW []int) error {
		if c == nil {
			return fmt.Errorf("%s: nil, want the intercommunicator of %v and %v", what, localW, remoteW)
		}
		if !c.IsInter() || c.Size() != len(localW) || c.RemoteSize() != len(remoteW) || c.Rank() != slices.Index(localW, rank) {
			return fmt.Errorf("%s: IsInter %v, rank %d of %d, remote size %d; want rank %d of %v and %v",
				what, c.IsInter(), c.Rank(), c.Size(), c.RemoteSize(), slices.Index(localW, rank), localW, remoteW)
		}
		lg, _ := c.Group()
		rg, err := c.RemoteGroup()
		if err != nil {
			return err
		}
		lw, err1 := mpi.GroupTranslateRanks(lg, seq(len(localW)), wg)
		rw, err2 := mpi.GroupTranslateRanks(rg, seq(len(remoteW)), wg)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if !slices.Equal(lw, localW) || !slices.Equal(rw, remoteW) {
			return fmt.Errorf("%s: groups %v and %v, want %v and %v", what, lw, rw, localW, remoteW)
		}
		s, r := []int{rank, 1}, make([]int, 2)
		if err := mpi.Allreduce(c, s, r, mpi.Sum); err != nil {
			return fmt.Errorf("%s: Allreduce: %w", what, err)
		}
		sum := 0
		for _, x := range remoteW {
			sum += x
		}
		if r[0] != sum || r[1] != len(remoteW) {
			return fmt.Errorf("%s: Allreduce gives %v, want [%d %d]", what, r, sum, len(remoteW))
		}
		var reqs []*mpi.Request
		for j := range remoteW {
			q, err := mpi.Isend(c, []int{rank}, j, 4)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for j, x := range remoteW {
			got := []int{-1}
			st, err := mpi.Recv(c, got, j, 4)
			if err != nil {
				return err
			}
			if got[0] != x || st.Source != j {
				return fmt.Errorf("%s: from remote rank %d: %d (source %d), want %d", what, j, got[0], st.Source, x)
			}
		}
		_, err = mpi.Waitall(reqs)
		return err
	}
	mine, theirs := group(color), group(1-color)

	d, err := inter.Dup()
	if err != nil {
		return fmt.Errorf("Dup: %w", err)
	}
	if err := check("Dup", d, mine, theirs); err != nil {
		return err
	}
	if got, _ := mpi.CommCompare(inter, d); got != mpi.Congruent {
		return fmt.Errorf("CommCompare(inter, its Dup) = %v, want Congruent", got)
	}
	// The leaders send 1 on inter, then 2 on the duplicate, and receive
	// on the duplicate first: contexts apart, it gets 2.
	if local.Rank() == 0 {
		q1, err1 := mpi.Isend(inter, []int{1}, 0, 6)
		q2, err2 := mpi.Isend(d, []int{2}, 0, 6)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		a, b := []int{0}, []int{0}
		_, err1 = mpi.Recv(d, b, 0, 6)
		_, err2 = mpi.Recv(inter, a, 0, 6)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if a[0] != 1 || b[0] != 2 {
			return fmt.Errorf("Dup: the original received %d and the duplicate %d, want 1 and 2", a[0], b[0])
		}
		if _, err := mpi.Waitall([]*mpi.Request{q1, q2}); err != nil {
			return err
		}
	}

	id, q, err := inter.Idup()
	if err != nil {
		return fmt.Errorf("Idup: %w", err)
	}
	if err := mpi.Barrier(inter); err != nil { // another call while it runs
		return err
	}
	if _, err := q.Wait(); err != nil {
		return fmt.Errorf("Idup's request: %w", err)
	}
	if err := check("Idup", id, mine, theirs); err != nil {
		return err
	}

	// Split: world rank 2 passes Undefined, the others color (r/4)%2 and
	// key -r (the new groups in decreasing world rank); a color only one
	// group has gives nil.
	colorOf := func(r int) int {
		if r == 2 {
			return mpi.Undefined
		}
		return (r / 4) % 2
	}
	of := func(g []int, c int) []int {
		var s []int
		for _, r := range slices.Backward(g) {
			if colorOf(r) == c {
				s = append(s, r)
			}
		}
		return s
	}
	sp, err := inter.Split(colorOf(rank), -rank)
	if err != nil {
		return fmt.Errorf("Split: %w", err)
	}
	wantL, wantR := of(mine, colorOf(rank)), of(theirs, colorOf(rank))
	if colorOf(rank) == mpi.Undefined || len(wantR) == 0 {
		if sp != nil {
			return fmt.Errorf("Split: color %d gives %s (remote size %d), want nil", colorOf(rank), sp.Name(), sp.RemoteSize())
		}
	} else if err := check("Split", sp, wantL, wantR); err != nil {
		return err
	}

	// Create: each group's members but its first, in reverse order.
	sub := func(g []int) []int {
		s := slices.Clone(g[1:])
		slices.Reverse(s)
		return s
	}
	lranks := seq(local.Size())
	slices.Reverse(lranks)
	lg, _ := inter.Group()
	g, err := lg.Incl(lranks[:len(lranks)-1])
	if err != nil {
		return err
	}
	cr, err := inter.Create(g)
	if err != nil {
		return fmt.Errorf("Create: %w", err)
	}
	wantL, wantR = sub(mine), sub(theirs)
	if !slices.Contains(wantL, rank) || len(wantR) == 0 {
		if cr != nil {
			return fmt.Errorf("Create: %s (remote size %d), want nil", cr.Name(), cr.RemoteSize())
		}
	} else if err := check("Create", cr, wantL, wantR); err != nil {
		return err
	}

	// A bad color in the odd group: ErrArg there, the even group's call
	// aborted. A group of the odd side that is not a subgroup of its
	// local group: ErrGroup there, the even group's call aborted.
	bad := 0
	if color == 1 {
		bad = -5
	}
	if c, err := inter.Split(bad, 0); err == nil || c != nil {
		return fmt.Errorf("Split with color -5 in the odd group: %v, %v; want an error", c, err)
	} else if color == 1 && !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("Split with color -5: %v, want ErrArg", err)
	}
	badg := lg
	if color == 1 {
		badg = wg
	}
	if c, err := inter.Create(badg); err == nil || c != nil {
		return fmt.Errorf("Create with the world group in the odd group: %v, %v; want an error", c, err)
	} else if color == 1 && !errors.Is(err, mpi.ErrGroup) {
		return fmt.Errorf("Create with the world group: %v, want ErrGroup", err)
	}
	if err := check("inter after the failed calls", inter, mine, theirs); err != nil {
		return err
	}
	for _, c := range []*mpi.Comm{d, id, sp, cr, inter, local} {
		if c == nil {
			continue
		}
		if err := c.Free(); err != nil {
			return err
		}
	}
	return mpi.Barrier(w)
}

func TestIntercommCtor(t *testing.T) {
	for _, np := range []int{2, 5, 6} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercomm-ctor"}.ok(t) })
	}
	t.Run("tcp/np=5", func(t *testing.T) { job{np: 5, cas: "intercomm-ctor", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
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

// caseCreateGroupUB: CreateGroup with tag TagUB at the same time as the
// communicator's first collective (whose shared-memory set-up sends on
// a tag of its own), from two goroutines, on fresh communicators: each
// must get its own messages. CreateGroup's TagUB messages used the
// set-up's tag; then one took the other's message (a wrong length, or a
// set-up or context id from the wrong bytes) or waited forever.
func caseCreateGroupUB(w *mpi.Comm) error {
	wg, _ := w.Group()
	for i := range 20 {
		d, err := w.Dup()
		if err != nil {
			return err
		}
		var g *mpi.Comm
		var gerr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			g, gerr = d.CreateGroup(wg, mpi.TagUB)
		}()
		s := []int64{int64(w.Rank())}
		rerr := mpi.Allreduce(d, s, s, mpi.Sum)
		<-done
		if err := errors.Join(gerr, rerr); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if want := int64(w.Size() * (w.Size() - 1) / 2); s[0] != want {
			return fmt.Errorf("round %d: Allreduce gives %d, want %d", i, s[0], want)
		}
		if g.Rank() != w.Rank() || g.Size() != w.Size() {
			return fmt.Errorf("round %d: the group's communicator has rank %d of %d", i, g.Rank(), g.Size())
		}
		if err := errors.Join(mpi.Barrier(g), g.Free(), d.Free()); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
	}
	return nil
}

func TestCreateGroup(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprint("tagub/np=", np), func(t *testing.T) { job{np: np, cas: "creategroup-ub"}.ok(t) })
	}
	for _, np := range []int{1, 3, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "creategroup"}.ok(t) })
	}
}
