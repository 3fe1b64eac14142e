package tests

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gorun/gorun/mpi"
)

// The Go twin of tests/openmpi/coll_check.c: the same collectives on the
// same inputs, printed the same way; TestCollAgainstOpenMPI compares the
// two outputs.

func init() { rankCases["coll-check"] = caseCollCheck }

const (
	ccK  = 7
	ccKL = 3001
)

type ccOut struct {
	b    strings.Builder
	rank int
}

func (o *ccOut) emit(format string, a ...any) { fmt.Fprintf(&o.b, format, a...) }

func (o *ccOut) ints(name string, v []int32) {
	o.emit("%s rank %d:", name, o.rank)
	if len(v) <= ccK {
		for _, x := range v {
			o.emit(" %d", x)
		}
	} else {
		const m = 1<<61 - 1
		var h uint64
		for i, x := range v {
			h = (h + uint64(i+1)*uint64(int64(x))) % m
		}
		o.emit(" n=%d h=%d", len(v), h)
	}
	o.emit("\n")
}

func (o *ccOut) dbls(name string, v []float64) {
	o.emit("%s rank %d:", name, o.rank)
	if len(v) <= ccK {
		for _, x := range v {
			o.emit(" %.17g", x)
		}
	} else {
		var s, t float64
		for i, x := range v {
			s += x
			t += float64(i%7) * x
		}
		o.emit(" n=%d s=%.17g t=%.17g", len(v), s, t)
	}
	o.emit("\n")
}

func ccInt(r, i int) int32      { return int32(((r+1)*(i+3)*7+i/5)%13 - 6) }
func ccDouble(r, i int) float64 { return 1/float64(r+i+1) + 0.1*float64(r) }
func pairs(v []complex128) []float64 {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&v[0])), 2*len(v))
}

func ccRun(w *mpi.Comm, o *ccOut, n int) error {
	size, rank := w.Size(), w.Rank()
	si, ri := make([]int32, n*size), make([]int32, n*size)
	sd, rd := make([]float64, n*size), make([]float64, n*size)
	sp, rp := make([]mpi.ValueIndex[float64], n), make([]mpi.ValueIndex[float64], n)
	sa, ra := make([]complex128, n), make([]complex128, n)
	for i := range si {
		si[i], sd[i] = ccInt(rank, i), ccDouble(rank, i)
	}
	for i := range n {
		sp[i] = mpi.ValueIndex[float64]{Value: math.Floor(math.Mod(ccDouble(rank, i)*4, 8)) / 4, Index: rank*100 + i}
		v := float64(ccInt(rank, i))
		sa[i] = complex(v+7, math.Mod(v*v+3, affineP))
	}
	var errs []error
	must := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	copy(ri, si[:n])
	must(mpi.Bcast(w, ri[:n], size/2))
	o.ints(fmt.Sprintf("bcast/%d", n), ri[:n])
	iops := []struct {
		name string
		op   mpi.Op
	}{{"sum", mpi.Sum}, {"prod", mpi.Prod}, {"min", mpi.Min}, {"max", mpi.Max}, {"land", mpi.Land}, {"lor", mpi.Lor},
		{"lxor", mpi.Lxor}, {"band", mpi.Band}, {"bor", mpi.Bor}, {"bxor", mpi.Bxor}}
	for _, op := range iops {
		must(mpi.Allreduce(w, si[:n], ri[:n], op.op))
		o.ints(fmt.Sprintf("allreduce/%s/%d", op.name, n), ri[:n])
	}
	for _, op := range iops[:4] {
		must(mpi.Allreduce(w, sd[:n], rd[:n], op.op))
		o.dbls(fmt.Sprintf("allreduce/double-%s/%d", op.name, n), rd[:n])
	}
	copy(rd, sd[:n])
	must(mpi.Allreduce(w, rd[:n], rd[:n], mpi.Sum))
	o.dbls(fmt.Sprintf("allreduce/inplace/%d", n), rd[:n])
	for _, loc := range []struct {
		name string
		op   mpi.Op
	}{{"minloc", mpi.MinLoc}, {"maxloc", mpi.MaxLoc}} {
		must(mpi.Allreduce(w, sp, rp, loc.op))
		o.emit("allreduce/%s/%d rank %d:", loc.name, n, rank)
		for i := 0; i < n && i < ccK; i++ {
			o.emit(" %.17g@%d", rp[i].Value, rp[i].Index)
		}
		o.emit("\n")
	}
	must(mpi.Allreduce(w, sa, ra, opAffine))
	o.dbls(fmt.Sprintf("allreduce/affine/%d", n), pairs(ra))
	must(mpi.Scan(w, sa, ra, opAffine))
	o.dbls(fmt.Sprintf("scan/affine/%d", n), pairs(ra))

	step := 1
	if size > 2 {
		step = size - 1
	}
	for root := 0; root < size; root += step {
		clear(ri[:n])
		must(mpi.Reduce(w, si[:n], ri[:n], mpi.Sum, root))
		if rank == root {
			o.ints(fmt.Sprintf("reduce/root%d/%d", root, n), ri[:n])
		}
		must(mpi.Reduce(w, sd[:n], rd[:n], mpi.Sum, root))
		if rank == root {
			o.dbls(fmt.Sprintf("reduce/double/root%d/%d", root, n), rd[:n])
		}
	}
	must(mpi.Gather(w, si[:n], ri, size-1))
	if rank == size-1 {
		o.ints(fmt.Sprintf("gather/%d", n), ri[:n*size])
	}
	must(mpi.Scatter(w, si, ri[:n], 0))
	o.ints(fmt.Sprintf("scatter/%d", n), ri[:n])
	must(mpi.Allgather(w, si[:n], ri))
	o.ints(fmt.Sprintf("allgather/%d", n), ri[:n*size])
	must(mpi.Alltoall(w, si, ri))
	o.ints(fmt.Sprintf("alltoall/%d", n), ri[:n*size])

	counts, displs := make([]int, size), make([]int, size)
	total := 0
	for r := range size {
		counts[r], displs[r] = max(0, n-r%3), total
		total += counts[r]
	}
	must(mpi.Gatherv(w, si[:counts[rank]], ri, counts, displs, 0))
	if rank == 0 {
		o.ints(fmt.Sprintf("gatherv/%d", n), ri[:total])
	}
	must(mpi.Scatterv(w, si, counts, displs, ri[:counts[rank]], size-1))
	o.ints(fmt.Sprintf("scatterv/%d", n), ri[:counts[rank]])
	must(mpi.Allgatherv(w, si[:counts[rank]], ri, counts, displs))
	o.ints(fmt.Sprintf("allgatherv/%d", n), ri[:total])
	rcounts, rdispls := make([]int, size), make([]int, size)
	st, rt := 0, 0
	for d := range size {
		counts[d], displs[d] = (rank+d)%3+n/2, st
		st += counts[d]
		rcounts[d], rdispls[d] = (d+rank)%3+n/2, rt
		rt += rcounts[d]
	}
	must(mpi.Alltoallv(w, si, counts, displs, ri, rcounts, rdispls))
	o.ints(fmt.Sprintf("alltoallv/%d", n), ri[:rt])

	must(mpi.ReduceScatterBlock(w, si, ri[:n], mpi.Sum))
	o.ints(fmt.Sprintf("reduce_scatter_block/%d", n), ri[:n])
	must(mpi.ReduceScatterBlock(w, sd, rd[:n], mpi.Sum))
	o.dbls(fmt.Sprintf("reduce_scatter_block/double/%d", n), rd[:n])
	for r := range size {
		rcounts[r] = n - r%2
	}
	must(mpi.ReduceScatter(w, si, ri[:rcounts[rank]], rcounts, mpi.Sum))
	o.ints(fmt.Sprintf("reduce_scatter/%d", n), ri[:rcounts[rank]])

	must(mpi.Scan(w, si[:n], ri[:n], mpi.Sum))
	o.ints(fmt.Sprintf("scan/%d", n), ri[:n])
	must(mpi.Scan(w, sd[:n], rd[:n], mpi.Sum))
	o.dbls(fmt.Sprintf("scan/double/%d", n), rd[:n])
	must(mpi.Exscan(w, si[:n], ri[:n], mpi.Sum))
	if rank > 0 {
		o.ints(fmt.Sprintf("exscan/%d", n), ri[:n])
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func ccComms(w *mpi.Comm, o *ccOut) error {
	size, rank := w.Size(), w.Rank()
	split, err := w.Split(rank%2, -rank)
	if err != nil {
		return err
	}
	sum := []int{rank}
	if err := mpi.Allreduce(split, sum, sum, mpi.Sum); err != nil {
		return err
	}
	o.emit("split rank %d: %d %d %d\n", rank, split.Rank(), split.Size(), sum[0])
	if err := split.Free(); err != nil {
		return err
	}
	dims, err := mpi.DimsCreate(size, []int{0, 0})
	if err != nil {
		return err
	}
	cart, err := mpi.CartCreate(w, dims, []bool{true, false}, false)
	if err != nil {
		return err
	}
	coords, _ := cart.CartCoords(rank)
	o.emit("cart rank %d: dims %d %d coords %d %d", rank, dims[0], dims[1], coords[0], coords[1])
	null := func(r int) int {
		if r == mpi.ProcNull {
			return -1
		}
		return r
	}
	src, dst, _ := cart.CartShift(0, 1)
	o.emit(" shift0 %d %d", null(src), null(dst))
	src, dst, _ = cart.CartShift(1, 1)
	o.emit(" shift1 %d %d\n", null(src), null(dst))
	row, err := cart.CartSub([]bool{false, true})
	if err != nil {
		return err
	}
	sum[0] = rank
	if err := mpi.Allreduce(row, sum, sum, mpi.Sum); err != nil {
		return err
	}
	o.emit("cartsub rank %d: %d %d\n", rank, row.Rank(), sum[0])
	if rank == 0 {
		for _, c := range [][2]int{{1, 2}, {6, 2}, {7, 2}, {12, 2}, {12, 3}, {16, 2}, {24, 2}, {30, 3}, {36, 2}, {64, 3}, {120, 4}} {
			d, err := mpi.DimsCreate(c[0], make([]int, c[1]))
			if err != nil {
				return err
			}
			o.emit("dims rank 0: %d %d ->", c[0], c[1])
			for _, x := range d {
				o.emit(" %d", x)
			}
			o.emit("\n")
		}
	}
	return nil
}

func caseCollCheck(w *mpi.Comm) error {
	o := &ccOut{rank: w.Rank()}
	for _, n := range []int{ccK, ccKL} {
		if err := ccRun(w, o, n); err != nil {
			return err
		}
	}
	if err := ccComms(w, o); err != nil {
		return err
	}
	mine := []byte(o.b.String())
	lens := make([]int64, w.Size())
	if err := mpi.Gather(w, []int64{int64(len(mine))}, lens, 0); err != nil {
		return err
	}
	counts, displs := make([]int, w.Size()), make([]int, w.Size())
	total := 0
	for r, l := range lens {
		counts[r], displs[r] = int(l), total
		total += int(l)
	}
	all := make([]byte, total)
	if err := mpi.Gatherv(w, mine, all, counts, displs, 0); err != nil {
		return err
	}
	if w.Rank() == 0 {
		fmt.Printf("%sdone\n", all)
	}
	return nil
}

// sameToken compares one token of the two outputs: integers exactly,
// floating-point numbers within a relative 1e-12, "v@i" pairs both ways,
// "k=v" by their values.
func sameToken(a, b string) bool {
	if a == b {
		return true
	}
	if ka, va, ok := strings.Cut(a, "="); ok {
		kb, vb, ok := strings.Cut(b, "=")
		return ok && ka == kb && sameToken(va, vb)
	}
	if xa, ia, ok := strings.Cut(a, "@"); ok {
		xb, ib, ok := strings.Cut(b, "@")
		return ok && ia == ib && sameToken(xa, xb)
	}
	if !strings.ContainsAny(a+b, ".eEnN") {
		return false // integers differ
	}
	fa, err1 := strconv.ParseFloat(a, 64)
	fb, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return math.Abs(fa-fb) <= 1e-12*math.Max(math.Abs(fa), math.Abs(fb))
}

// TestCollAgainstOpenMPI runs coll_check under Open MPI and its Go twin
// under gorun at each np and compares every line: integer results
// exactly, floating-point ones within a relative 1e-12, since the two may
// associate a reduction differently (a sum of n doubles moves by at most
// about (n-1)·2^-53 relative for these positive inputs; 1e-12 leaves room
// for the cancellation in the digests).
func TestCollAgainstOpenMPI(t *testing.T) {
	ref := openmpi(t)
	for _, np := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			want := strings.Split(strings.TrimSpace(mpirun(t, np, filepath.Join(ref, "coll_check"))), "\n")
			got := strings.Split(strings.TrimSpace(job{np: np, cas: "coll-check"}.ok(t).stdout), "\n")
			if len(got) != len(want) {
				t.Fatalf("gorun printed %d lines, Open MPI %d\ngorun:\n%s\nOpen MPI:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			exact := 0
			for i := range want {
				g, w := strings.Fields(got[i]), strings.Fields(want[i])
				ok := len(g) == len(w)
				for j := 0; ok && j < len(g); j++ {
					ok = sameToken(g[j], w[j])
				}
				if !ok {
					t.Errorf("line %d differs:\n  gorun:    %s\n  Open MPI: %s", i+1, got[i], want[i])
				}
				if got[i] == want[i] {
					exact++
				}
			}
			t.Logf("%d lines, %d identical to the byte", len(want), exact)
		})
	}
}
