package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Dynamic windows (WinCreateDynamic, Attach, Detach), issue 16: every rank
// attaches a short and a long slice and publishes their displacements;
// Puts, Gets and accumulates in fence and passive-target epochs against a
// sequential result; operations outside the attached memory (past a
// slice's end, on a detached slice, never attached) fail at the origin
// with ErrRMARange and disturb nothing after them; the flavour and attach
// errors.

func init() { rankCases["win-dynamic"] = caseWinDynamic }

func caseWinDynamic(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	right, left := (me+1)%n, (me-1+n)%n
	const long = 30_000 // past the eager limits: rendezvous into the slice
	win, err := mpi.WinCreateDynamic[int64](w)
	if err != nil {
		return err
	}
	if win.Size(me) != 0 || win.Local() != nil {
		return fmt.Errorf("dynamic window: Size %d, Local %v; want 0 and nil", win.Size(me), win.Local())
	}
	a := make([]int64, 4)
	b := make([]int64, long)
	for i := range b {
		b[i] = int64(me*long + i)
	}
	da, err := win.Attach(a)
	if err != nil {
		return err
	}
	db, err := win.Attach(b)
	if err != nil {
		return err
	}
	disps := make([]int64, 2*n)
	if err := mpi.Allgather(w, []int64{int64(da), int64(db)}, disps); err != nil {
		return err
	}
	dA := func(r int) int { return int(disps[2*r]) }
	dB := func(r int) int { return int(disps[2*r+1]) }

	// Fence epoch: my rank into the right neighbour's a; the long slice
	// read from the left neighbour; everyone adds into rank 0's a[3].
	got := make([]int64, long)
	if err := win.Fence(); err != nil {
		return err
	}
	if err := firstError(
		win.Put([]int64{int64(me), int64(me) * 2, int64(me) * 3}, right, dA(right)),
		win.Get(got, left, dB(left)),
		win.Accumulate([]int64{int64(me + 1)}, 0, dA(0)+3, mpi.Sum),
	); err != nil {
		return fmt.Errorf("fence epoch: %w", err)
	}
	if err := win.Fence(); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if a[0] != int64(left) || a[1] != 2*int64(left) || a[2] != 3*int64(left) {
		return fmt.Errorf("a = %v after the fence, want [%d %d %d ...] from rank %d", a, left, 2*left, 3*left, left)
	}
	if me == 0 && a[3] != int64(n*(n+1)/2) {
		return fmt.Errorf("rank 0's a[3] = %d, want %d", a[3], n*(n+1)/2)
	}
	for i := range got {
		if want := int64(left*long + i); got[i] != want {
			return fmt.Errorf("Get of rank %d's long slice: element %d = %d, want %d", left, i, got[i], want)
		}
	}

	// Everyone has read its a before the next epoch writes it.
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// A bad operation in a fence epoch fails at the Fence and leaves the
	// good one after it alone: one element past a's end (the gap).
	if err := win.Put([]int64{-1}, right, dA(right)+4); err != nil {
		return fmt.Errorf("Put past the end returned %w at once; the origin cannot know", err)
	}
	if err := win.Put([]int64{int64(100 + me)}, right, dA(right)+3); err != nil {
		return err
	}
	if err := win.Fence(); !errors.Is(err, mpi.ErrRMARange) {
		return fmt.Errorf("Fence after a Put past a slice's end: %v, want ErrRMARange", err)
	}
	if a[3] != int64(100+left) {
		return fmt.Errorf("a[3] = %d after a refused Put and a good one, want %d", a[3], 100+left)
	}
	if err := win.Fence(); err != nil {
		return fmt.Errorf("the fence after: %w", err)
	}

	// Passive target: a request-based Get of a slice never attached at
	// that displacement fails with its Request; a ticket from the last
	// rank's a[0] works meanwhile.
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if err := win.LockAll(); err != nil {
		return err
	}
	bad, err := win.Rget(make([]int64, 2), right, 1<<40)
	if err != nil {
		return err
	}
	if _, err := bad.Wait(); !errors.Is(err, mpi.ErrRMARange) {
		return fmt.Errorf("Rget far beyond anything attached: %v, want ErrRMARange", err)
	}
	var old int64
	if err := firstError(win.FetchAndOp(1, &old, n-1, dA(n-1)+1, mpi.Sum), win.Flush(n-1)); err != nil {
		return fmt.Errorf("FetchAndOp after a refused Rget: %w", err)
	}
	if err := win.UnlockAll(); err != nil {
		return err
	}
	olds := make([]int64, n)
	if err := mpi.Allgather(w, []int64{old}, olds); err != nil {
		return err
	}
	base := 2 * int64(n-2) // rank n-1's a[1] was 2*(its left neighbour)
	if n == 1 {
		base = 0
	}
	seen := map[int64]bool{}
	for _, o := range olds {
		if o < base || o >= base+int64(n) || seen[o] {
			return fmt.Errorf("FetchAndOp results %v: want each of %d..%d once", olds, base, base+int64(n)-1)
		}
		seen[o] = true
	}

	// Detach: the neighbour's a is gone; a Put there fails at Unlock.
	if err := win.Detach(a); err != nil {
		return err
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if err := win.Lock(mpi.LockShared, right); err != nil {
		return err
	}
	if err := win.Put([]int64{7}, right, dA(right)); err != nil {
		return err
	}
	if err := win.Unlock(right); !errors.Is(err, mpi.ErrRMARange) {
		return fmt.Errorf("Put into a detached slice: Unlock = %v, want ErrRMARange", err)
	}
	// Attached again, a gets a new displacement; the old one stays dead.
	da2, err := win.Attach(a)
	if err != nil {
		return err
	}
	if da2 == da {
		return fmt.Errorf("re-attached slice got displacement %d again", da)
	}

	// Local errors.
	if _, err := win.Attach(b[10:20]); !errors.Is(err, mpi.ErrRMAAttach) {
		return fmt.Errorf("Attach of an overlapping slice: %v, want ErrRMAAttach", err)
	}
	if _, err := win.Attach([]int64{}); !errors.Is(err, mpi.ErrRMAAttach) {
		return fmt.Errorf("Attach of an empty slice: %v, want ErrRMAAttach", err)
	}
	if err := win.Detach(b[1:]); !errors.Is(err, mpi.ErrRMAAttach) {
		return fmt.Errorf("Detach of a slice not attached: %v, want ErrRMAAttach", err)
	}
	if err := firstError(win.Detach(a), win.Detach(b)); err != nil {
		return err
	}
	static, err := mpi.WinAllocate[int64](w, 1)
	if err != nil {
		return err
	}
	if _, err := static.Attach(a); !errors.Is(err, mpi.ErrRMAFlavor) {
		return fmt.Errorf("Attach on a WinAllocate window: %v, want ErrRMAFlavor", err)
	}

	// Attributes: flavours, the model, a user attribute whose delete
	// callback runs once, at Free.
	created, err := mpi.WinCreate(w, make([]int64, 1))
	if err != nil {
		return err
	}
	node, err := w.SplitType(mpi.SplitShared, 0)
	if err != nil {
		return err
	}
	shared, err := mpi.WinAllocateShared[int64](node, 1)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		got, want mpi.Flavor
	}{{win.Flavor(), mpi.FlavorDynamic}, {static.Flavor(), mpi.FlavorAllocate}, {created.Flavor(), mpi.FlavorCreate}, {shared.Flavor(), mpi.FlavorShared}} {
		if f.got != f.want {
			return fmt.Errorf("flavor %v, want %v", f.got, f.want)
		}
	}
	if win.Model() != mpi.ModelUnified {
		return fmt.Errorf("model %v, want unified", win.Model())
	}
	deleted := 0
	key, err := mpi.CreateKeyval(nil, func(*mpi.Comm, mpi.Keyval, any) error { deleted++; return nil })
	if err != nil {
		return err
	}
	if err := static.SetAttr(key, "halo"); err != nil {
		return err
	}
	if v, ok, err := static.GetAttr(key); err != nil || !ok || v != "halo" {
		return fmt.Errorf("GetAttr: %v, %v, %v; want halo", v, ok, err)
	}
	if _, _, err := static.GetAttr(mpi.KeyTagUB); !errors.Is(err, mpi.ErrKeyval) {
		return fmt.Errorf("GetAttr of a communicator's predefined key: %v, want ErrKeyval", err)
	}
	if err := firstError(static.Free(), win.Free(), created.Free(), shared.Free(), node.Free(), mpi.FreeKeyval(key)); err != nil {
		return err
	}
	if deleted != 1 {
		return fmt.Errorf("delete callback ran %d times at Free, want 1", deleted)
	}
	return mpi.Barrier(w)
}

func TestWinDynamic(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-dynamic"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "win-dynamic", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
