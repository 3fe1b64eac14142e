package tests

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// The MPI-3 parts of one-sided communication against Open MPI (issue 16):
// the twin of tests/openmpi/win2.c (its comment says what it does), with
// the same output, and the sequential result.

func init() { rankCases["win2-ref"] = caseWin2Ref }

const win2N = 12

func caseWin2Ref(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	left, right := (me-1+n)%n, (me+1)%n
	win, err := mpi.WinAllocate[int64](w, win2N)
	if err != nil {
		return err
	}
	buf := win.Local()
	for i := range buf {
		buf[i] = int64(me*100 + i)
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	one := []int64{int64(me + 1)}
	if err := firstError(win.Fence(mpi.ModeNoPrecede), win.Put([]int64{int64(me*1000 + 1)}, right, 0),
		win.Accumulate(one, 0, 7, mpi.Sum), win.Fence(mpi.ModeNoSucceed)); err != nil {
		return err
	}

	got, getacc := make([]int64, 2), make([]int64, 1)
	var fop, cas int64
	if err := win.LockAll(); err != nil {
		return err
	}
	var qs []*mpi.Request
	for _, f := range []func() (*mpi.Request, error){
		func() (*mpi.Request, error) { return win.Rget(got, left, 4) },
		func() (*mpi.Request, error) { return win.Rput([]int64{int64(-me)}, right, 1) },
		func() (*mpi.Request, error) { return win.Raccumulate(one, 0, 6, mpi.Sum) },
		func() (*mpi.Request, error) { return win.RgetAccumulate([]int64{1}, getacc, left, 3, mpi.Sum) },
	} {
		q, err := f()
		if err != nil {
			return err
		}
		qs = append(qs, q)
	}
	if _, err := mpi.Waitall(qs); err != nil {
		return err
	}
	if err := firstError(win.FetchAndOp(1, &fop, n-1, 2, mpi.Sum),
		win.CompareAndSwap(int64(me*7), int64(right*100+8), &cas, right, 8), win.UnlockAll(), mpi.Barrier(w)); err != nil {
		return err
	}

	wg, err := w.Group()
	if err != nil {
		return err
	}
	nb := []int{left}
	if right != left {
		nb = append(nb, right)
	}
	nbrs, err := wg.Incl(nb)
	if err != nil {
		return err
	}
	if err := firstError(win.Post(nbrs), win.Start(nbrs), win.Put([]int64{int64(me*10 + 1)}, left, 9), win.Complete()); err != nil {
		return err
	}
	for {
		done, err := win.Test()
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	row := []int64{got[0], got[1], getacc[0], cas}
	own := make([]int64, win2N)
	if err := firstError(win.Lock(mpi.LockShared, me), win.Get(own, me, 0), win.Unlock(me), mpi.Barrier(w), win.Free()); err != nil {
		return err
	}
	row = append(row, own...)

	dyn, err := mpi.WinCreateDynamic[int64](w)
	if err != nil {
		return err
	}
	d := []int64{int64(me), 0}
	disp, err := dyn.Attach(d)
	if err != nil {
		return err
	}
	disps := make([]int64, n)
	if err := mpi.Allgather(w, []int64{int64(disp)}, disps); err != nil {
		return err
	}
	if err := firstError(dyn.LockAll(), dyn.Put([]int64{int64(me + 500)}, right, int(disps[right])+1), dyn.UnlockAll(),
		mpi.Barrier(w), dyn.Lock(mpi.LockShared, me), dyn.Unlock(me)); err != nil {
		return err
	}
	row = append(row, d...)
	if err := firstError(dyn.Detach(d), dyn.Free()); err != nil {
		return err
	}

	var all []int64
	if me == 0 {
		all = make([]int64, len(row)*n)
	}
	if err := mpi.Gather(w, row, all, 0); err != nil {
		return err
	}
	if me == 0 {
		fmt.Print(win2Lines(n, all))
	}
	return nil
}

// win2Lines formats the gathered rows as win2.c prints them.
func win2Lines(n int, all []int64) string {
	var b []byte
	l := len(all) / n
	for r := range n {
		x := all[l*r:]
		b = fmt.Appendf(b, "rank %d: get %d %d getacc %d cas %d own", r, x[0], x[1], x[2], x[3])
		for _, v := range x[4 : 4+win2N] {
			b = fmt.Appendf(b, " %d", v)
		}
		b = fmt.Appendf(b, " dyn %d %d\n", x[4+win2N], x[5+win2N])
	}
	return string(b) + "done\n"
}

// win2Sequential is what win2.c prints, computed on one process.
func win2Sequential(n int) string {
	l := 4 + win2N + 2
	all := make([]int64, l*n)
	win := make([][]int64, n)
	for r := range n {
		win[r] = make([]int64, win2N)
		for i := range win[r] {
			win[r][i] = int64(r*100 + i)
		}
	}
	init := func(r, i int) int64 { return int64(r*100 + i) }
	for me := range n {
		left, right := (me-1+n)%n, (me+1)%n
		x := all[l*me:]
		x[0], x[1] = init(left, 4), init(left, 5)
		x[2] = init(left, 3)
		x[3] = init(right, 8)
		win[right][0] = int64(me*1000 + 1)
		win[0][7] += int64(me + 1)
		win[right][1] = int64(-me)
		win[0][6] += int64(me + 1)
		win[left][3]++
		win[n-1][2]++
		win[right][8] = int64(me * 7)
		win[left][9] = int64(me*10 + 1)
		x[4+win2N], x[5+win2N] = int64(me), int64(left+500)
	}
	for r := range n {
		copy(all[l*r+4:], win[r])
	}
	return win2Lines(n, all)
}

// TestWin2AgainstOpenMPI: the program gives the lines tests/openmpi/win2.c
// gives under Open MPI, and the sequential ones, with the one-sided paths
// on and off.
func TestWin2AgainstOpenMPI(t *testing.T) {
	for _, np := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			got := job{np: np, cas: "win2-ref"}.ok(t).stdout
			if seq := win2Sequential(np); got != seq {
				t.Fatalf("gorun:\n%s\nsequential:\n%s", got, seq)
			}
			if msgs := (job{np: np, cas: "win2-ref", env: []string{"GORUN_RMA_DIRECT=0"}}).ok(t).stdout; msgs != got {
				t.Fatalf("gorun, one-sided:\n%s\nas messages:\n%s", got, msgs)
			}
			t.Setenv("OMPI_MCA_osc", "^rdma") // as in TestWinAgainstOpenMPI
			if want := mpirun(t, np, filepath.Join(openmpi(t), "win2")); got != want {
				t.Fatalf("gorun:\n%s\nOpen MPI:\n%s", got, want)
			}
		})
	}
}
