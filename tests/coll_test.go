package tests

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// The collective tests run many checks inside one gorun job per process
// count: every algorithm of every collective (forced with
// mpi.SetCollAlgorithm) at counts 0, 1, odd and large, and every datatype
// with every operation that applies to it, each against a result the test
// computes sequentially from the same deterministic inputs. The job runs
// with a small GORUN_COLL_SEGSIZE so that the pipelined algorithms cross
// many segments, and at some process counts with GORUN_COLL_FAKE_NODES so
// that the hierarchical algorithms run on this one host.

func init() {
	rankCases["coll-algorithms"] = caseCollAlgorithms
	rankCases["coll-types"] = caseCollTypes
	rankCases["coll-nonblocking"] = caseCollNonblocking
	rankCases["coll-nonblocking-shm"] = caseCollNonblockingShm
	rankCases["coll-nonblocking-progress"] = caseCollNonblockingProgress
	rankCases["coll-nonblocking-free"] = caseCollNonblockingFree
	rankCases["coll-nonblocking-panic"] = caseCollNonblockingPanic
	rankCases["coll-errors"] = caseCollErrors
}

// collCounts are the counts every algorithm is run at: empty, one
// element, odd, and large (above TCP's 64 KiB eager limit for 4-byte
// elements, so rendezvous and many segments).
var collCounts = []int{0, 1, 33, 20011}

// val is the deterministic input: a small integer, so that sums and
// products of up to 8 of them are exact in every float type.
func val(rank, i, seed int) int {
	return ((rank+1)*(i+3)*7+seed*13+i/5)%13 - 6
}

// elem is what the checks compare: a collective's element type.
type elem interface {
	mpi.Element
	comparable
}

// conv makes T from a small integer.
type conv[T any] func(int) T

func input[T any](mk conv[T], rank, n, seed int) []T {
	b := make([]T, n)
	for i := range b {
		b[i] = mk(val(rank, i, seed))
	}
	return b
}

func mismatch[T elem](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d of %d = %v, want %v", what, i, len(got), got[i], want[i])
		}
	}
	return nil
}

// refReduce folds the inputs of every rank in rank order with f(lower,
// higher).
func refReduce[T any](n int, in func(r int) []T, f func(a, b T) T) []T {
	acc := slices.Clone(in(0))
	for r := 1; r < n; r++ {
		x := in(r)
		for i := range acc {
			acc[i] = f(acc[i], x[i])
		}
	}
	return acc
}

// redCase is a reduction to check: an operation with its sequential
// reference.
type redCase[T comparable] struct {
	name string
	op   mpi.Op
	ref  func(a, b T) T
	mk   conv[T]
}

// checkReductions runs Reduce (every root), Allreduce, Scan, Exscan,
// ReduceScatter, ReduceScatterBlock and their in-place forms for one
// operation and count k.
func checkReductions[T elem](w *mpi.Comm, only string, rc redCase[T], k, seed int) error {
	on := func(name string) bool { return only == "" || only == name }
	n, me := w.Size(), w.Rank()
	in := func(r int) []T { return input(rc.mk, r, k, seed) }
	full := refReduce(n, in, rc.ref)
	tag := fmt.Sprintf("%s %T k=%d", rc.name, *new(T), k)
	var buf, out []T
	var zero T

	if on("reduce") {
		for _, root := range []int{0, n - 1, n / 2} {
			out := make([]T, k)
			if err := mpi.Reduce(w, in(me), out, rc.op, root); err != nil {
				return fmt.Errorf("Reduce %s root %d: %w", tag, root, err)
			}
			if me == root {
				if err := mismatch(fmt.Sprintf("Reduce %s root %d", tag, root), out, full); err != nil {
					return err
				}
			}
		}
		// Reduce in place at the root.
		buf := in(me)
		var recv []T
		if me == n-1 {
			recv = buf
		}
		if err := mpi.Reduce(w, buf, recv, rc.op, n-1); err != nil {
			return fmt.Errorf("Reduce in place %s: %w", tag, err)
		}
		if me == n-1 {
			if err := mismatch("Reduce in place "+tag, buf, full); err != nil {
				return err
			}
		}

	}
	if on("allreduce") {
		out = make([]T, k+1) // one spare element that must stay untouched
		if err := mpi.Allreduce(w, in(me), out, rc.op); err != nil {
			return fmt.Errorf("Allreduce %s: %w", tag, err)
		}
		if err := mismatch("Allreduce "+tag, out[:k], full); err != nil {
			return err
		}
		if out[k] != zero {
			return fmt.Errorf("Allreduce %s wrote past the count", tag)
		}
		buf = in(me)
		if err := mpi.Allreduce(w, buf, buf, rc.op); err != nil {
			return fmt.Errorf("Allreduce in place %s: %w", tag, err)
		}
		if err := mismatch("Allreduce in place "+tag, buf, full); err != nil {
			return err
		}

	}
	if on("scan") {
		prefix := refReduce(me+1, in, rc.ref)
		out = make([]T, k)
		if err := mpi.Scan(w, in(me), out, rc.op); err != nil {
			return fmt.Errorf("Scan %s: %w", tag, err)
		}
		if err := mismatch("Scan "+tag, out, prefix); err != nil {
			return err
		}
		buf = in(me)
		if err := mpi.Scan(w, buf, buf, rc.op); err != nil {
			return fmt.Errorf("Scan in place %s: %w", tag, err)
		}
		if err := mismatch("Scan in place "+tag, buf, prefix); err != nil {
			return err
		}

	}
	if on("exscan") {
		sentinel := input(rc.mk, 99, k, seed)
		out = slices.Clone(sentinel)
		if err := mpi.Exscan(w, in(me), out, rc.op); err != nil {
			return fmt.Errorf("Exscan %s: %w", tag, err)
		}
		want := sentinel
		if me > 0 {
			want = refReduce(me, in, rc.ref)
		}
		if err := mismatch("Exscan "+tag, out, want); err != nil {
			return err
		}
		buf = in(me)
		if err := mpi.Exscan(w, buf, buf, rc.op); err != nil {
			return fmt.Errorf("Exscan in place %s: %w", tag, err)
		}
		if me > 0 {
			if err := mismatch("Exscan in place "+tag, buf, want); err != nil {
				return err
			}
		}

	}
	if on("reduce_scatter_block") {
		// ReduceScatterBlock: n blocks of k.
		bin := func(r int) []T { return input(rc.mk, r, n*k, seed+1) }
		bfull := refReduce(n, bin, rc.ref)
		out = make([]T, k)
		if err := mpi.ReduceScatterBlock(w, bin(me), out, rc.op); err != nil {
			return fmt.Errorf("ReduceScatterBlock %s: %w", tag, err)
		}
		if err := mismatch("ReduceScatterBlock "+tag, out, bfull[me*k:(me+1)*k]); err != nil {
			return err
		}
		buf = bin(me)
		if err := mpi.ReduceScatterBlock(w, buf, buf, rc.op); err != nil {
			return fmt.Errorf("ReduceScatterBlock in place %s: %w", tag, err)
		}
		if err := mismatch("ReduceScatterBlock in place "+tag, buf[:k], bfull[me*k:(me+1)*k]); err != nil {
			return err
		}

	}
	if on("reduce_scatter") {
		// ReduceScatter: block r has k+(r%3)-1 elements (at least 0).
		counts := make([]int, n)
		total := 0
		for r := range counts {
			counts[r] = max(0, k+r%3-1)
			total += counts[r]
		}
		vin := func(r int) []T { return input(rc.mk, r, total, seed+2) }
		vfull := refReduce(n, vin, rc.ref)
		off := 0
		for r := 0; r < me; r++ {
			off += counts[r]
		}
		out = make([]T, counts[me])
		if err := mpi.ReduceScatter(w, vin(me), out, counts, rc.op); err != nil {
			return fmt.Errorf("ReduceScatter %s: %w", tag, err)
		}
		if err := mismatch("ReduceScatter "+tag, out, vfull[off:off+counts[me]]); err != nil {
			return err
		}
		buf = vin(me)
		if err := mpi.ReduceScatter(w, buf, buf, counts, rc.op); err != nil {
			return fmt.Errorf("ReduceScatter in place %s: %w", tag, err)
		}
		if err := mismatch("ReduceScatter in place "+tag, buf[:counts[me]], vfull[off:off+counts[me]]); err != nil {
			return err
		}
	}
	return nil
}

// checkMovement runs Bcast (every root), Gather(v), Scatter(v),
// Allgather(v), Alltoall(v) and their in-place forms for count k.
func checkMovement[T elem](w *mpi.Comm, only string, mk conv[T], k, seed int) error {
	on := func(name string) bool { return only == "" || only == name }
	n, me := w.Size(), w.Rank()
	in := func(r int) []T { return input(mk, r, k, seed) }
	tag := fmt.Sprintf("%T k=%d", *new(T), k)
	if on("bcast") {
		for _, root := range []int{0, n - 1, n / 2} {
			buf := make([]T, k)
			if me == root {
				buf = in(root)
			}
			if err := mpi.Bcast(w, buf, root); err != nil {
				return fmt.Errorf("Bcast %s root %d: %w", tag, root, err)
			}
			if err := mismatch(fmt.Sprintf("Bcast %s root %d", tag, root), buf, in(root)); err != nil {
				return err
			}
		}

	}
	var all []T
	for r := range n {
		all = append(all, in(r)...)
	}
	for _, root := range []int{0, n - 1} {
		if on("gather") {
			out := make([]T, n*k)
			if err := mpi.Gather(w, in(me), out, root); err != nil {
				return fmt.Errorf("Gather %s root %d: %w", tag, root, err)
			}
			if me == root {
				if err := mismatch(fmt.Sprintf("Gather %s root %d", tag, root), out, all); err != nil {
					return err
				}
			}
			// In place at the root.
			send := in(me)
			if me == root {
				copy(out[root*k:], in(root))
				send = out[root*k : (root+1)*k]
				clear(out[:root*k])
			}
			if err := mpi.Gather(w, send, out, root); err != nil {
				return fmt.Errorf("Gather in place %s: %w", tag, err)
			}
			if me == root {
				if err := mismatch("Gather in place "+tag, out, all); err != nil {
					return err
				}
			}
		}
		if on("scatter") {
			// Scatter back.
			got := make([]T, k)
			var src []T
			if me == root {
				src = all
			}
			if err := mpi.Scatter(w, src, got, root); err != nil {
				return fmt.Errorf("Scatter %s root %d: %w", tag, root, err)
			}
			if err := mismatch(fmt.Sprintf("Scatter %s root %d", tag, root), got, in(me)); err != nil {
				return err
			}
			if me == root {
				src = slices.Clone(all)
				got = src[root*k : (root+1)*k]
			}
			if err := mpi.Scatter(w, src, got, root); err != nil {
				return fmt.Errorf("Scatter in place %s: %w", tag, err)
			}
			if err := mismatch("Scatter in place "+tag, got, in(me)); err != nil {
				return err
			}
		}
	}
	if on("allgather") {
		out := make([]T, n*k)
		if err := mpi.Allgather(w, in(me), out); err != nil {
			return fmt.Errorf("Allgather %s: %w", tag, err)
		}
		if err := mismatch("Allgather "+tag, out, all); err != nil {
			return err
		}
		out = make([]T, n*k)
		copy(out[me*k:], in(me))
		if err := mpi.Allgather(w, out[me*k:(me+1)*k], out); err != nil {
			return fmt.Errorf("Allgather in place %s: %w", tag, err)
		}
		if err := mismatch("Allgather in place "+tag, out, all); err != nil {
			return err
		}

	}
	if on("alltoall") {
		// Alltoall: rank r's block for rank d is input(r, k, seed+d).
		a2a := func(r int) []T {
			var b []T
			for d := range n {
				b = append(b, input(mk, r, k, seed+3*d+r)...)
			}
			return b
		}
		var wantA []T
		for r := range n {
			wantA = append(wantA, input(mk, r, k, seed+3*me+r)...)
		}
		out := make([]T, n*k)
		if err := mpi.Alltoall(w, a2a(me), out); err != nil {
			return fmt.Errorf("Alltoall %s: %w", tag, err)
		}
		if err := mismatch("Alltoall "+tag, out, wantA); err != nil {
			return err
		}
		buf := a2a(me)
		if err := mpi.Alltoall(w, buf, buf); err != nil {
			return fmt.Errorf("Alltoall in place %s: %w", tag, err)
		}
		if err := mismatch("Alltoall in place "+tag, buf, wantA); err != nil {
			return err
		}

	}
	return checkV(w, only, mk, k, seed)
}

// checkV runs the v forms with uneven counts and gaps between blocks.
func checkV[T elem](w *mpi.Comm, only string, mk conv[T], k, seed int) error {
	on := func(name string) bool { return only == "" || only == name }
	n, me := w.Size(), w.Rank()
	tag := fmt.Sprintf("%T k=%d", *new(T), k)
	count := func(r int) int { return max(0, k+(r*5)%3-1) }
	counts, displs := make([]int, n), make([]int, n)
	size := 0
	for r := n - 1; r >= 0; r-- { // blocks in reverse order, with gaps
		counts[r], displs[r] = count(r), size+1
		size += count(r) + 2
	}
	in := func(r int) []T { return input(mk, r, count(r), seed+r) }
	var zero T
	want := make([]T, size)
	for r := range n {
		copy(want[displs[r]:], in(r))
	}
	root := n / 2
	var out []T
	if on("gatherv") {
		out = make([]T, size)
		if err := mpi.Gatherv(w, in(me), out, counts, displs, root); err != nil {
			return fmt.Errorf("Gatherv %s: %w", tag, err)
		}
		if me == root {
			if err := mismatch("Gatherv "+tag, out, want); err != nil {
				return err
			}
		}

	}
	if on("scatterv") {
		got := make([]T, count(me))
		if err := mpi.Scatterv(w, want, counts, displs, got, root); err != nil {
			return fmt.Errorf("Scatterv %s: %w", tag, err)
		}
		if err := mismatch("Scatterv "+tag, got, in(me)); err != nil {
			return err
		}

	}
	if on("allgatherv") {
		out = make([]T, size)
		if err := mpi.Allgatherv(w, in(me), out, counts, displs); err != nil {
			return fmt.Errorf("Allgatherv %s: %w", tag, err)
		}
		if err := mismatch("Allgatherv "+tag, out, want); err != nil {
			return err
		}
		out = make([]T, size)
		copy(out[displs[me]:], in(me))
		if err := mpi.Allgatherv(w, out[displs[me]:displs[me]+counts[me]], out, counts, displs); err != nil {
			return fmt.Errorf("Allgatherv in place %s: %w", tag, err)
		}
		if err := mismatch("Allgatherv in place "+tag, out, want); err != nil {
			return err
		}

	}
	if on("alltoallv") {
		// Alltoallv: rank s sends rank d count(s+d) elements.
		cnt := func(s, d int) int { return max(0, k+(s+2*d)%3-1) }
		block := func(s, d int) []T { return input(mk, s, cnt(s, d), seed+7*d+s) }
		sc, sd, rc, rd := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
		var send []T
		for d := range n {
			sc[d], sd[d] = cnt(me, d), len(send)
			send = append(send, block(me, d)...)
		}
		rsize := 1
		for s := n - 1; s >= 0; s-- {
			rc[s], rd[s] = cnt(s, me), rsize
			rsize += cnt(s, me) + 1
		}
		out = make([]T, rsize)
		if err := mpi.Alltoallv(w, send, sc, sd, out, rc, rd); err != nil {
			return fmt.Errorf("Alltoallv %s: %w", tag, err)
		}
		for s := range n {
			if err := mismatch(fmt.Sprintf("Alltoallv %s from %d", tag, s), out[rd[s]:rd[s]+rc[s]], block(s, me)); err != nil {
				return err
			}
			if out[rd[s]-1] != zero {
				return fmt.Errorf("Alltoallv %s wrote into a gap", tag)
			}
		}
	}
	return nil
}

// Element makers.
func mkInt32(v int) int32     { return int32(v) }
func mkUint8(v int) uint8     { return uint8(v) }
func mkFloat64(v int) float64 { return float64(v) / 4 }
func mkPair(v int) mpi.ValueIndex[float32] {
	return mpi.ValueIndex[float32]{Value: float32(v), Index: v * 3}
}

// affine is a non-commutative associative operation: complex128 (a, b)
// stands for x -> a*x+b mod p, and in ⊕ inout applies in first. Exact in
// float64 because p*p < 2^53.
const affineP = 65521

func affine(lo, hi complex128) complex128 {
	a1, b1, a2, b2 := real(lo), imag(lo), real(hi), imag(hi)
	return complex(math.Mod(a1*a2, affineP), math.Mod(a2*b1+b2, affineP))
}

var opAffine = mpi.NewOp("affine", func(in, inout []complex128) {
	for i := range inout {
		inout[i] = affine(in[i], inout[i])
	}
}, false)

func mkAffine(v int) complex128 { return complex(float64(v+7), float64((v*v+3)%affineP)) }

func minloc(a, b mpi.ValueIndex[float64]) mpi.ValueIndex[float64] {
	if b.Value < a.Value || (b.Value == a.Value && b.Index < a.Index) {
		return b
	}
	return a
}

func mkLoc(v int) mpi.ValueIndex[float64] {
	return mpi.ValueIndex[float64]{Value: float64(v % 4), Index: v + 6}
}

// checkAll runs the checks of collective only ("" for every one) for
// one count: data movement on 1-, 4- and 16-byte elements, reductions
// with a commutative operation on integers and on floats, a
// non-commutative user operation and MinLoc on pairs.
func checkAll(w *mpi.Comm, only string, k, seed int) error {
	return errors.Join(
		checkBarrier(w, only, k),
		checkMovement(w, only, mkInt32, k, seed),
		checkMovement(w, only, mkUint8, k, seed+1),
		checkMovement(w, only, mkPair, k, seed+2),
		checkReductions(w, only, redCase[int32]{"sum", mpi.Sum, func(a, b int32) int32 { return a + b }, mkInt32}, k, seed),
		checkReductions(w, only, redCase[float64]{"max", mpi.Max, func(a, b float64) float64 { return max(a, b) }, mkFloat64}, k, seed),
		checkReductions(w, only, redCase[complex128]{"affine", opAffine, affine, mkAffine}, k, seed),
		checkReductions(w, only, redCase[mpi.ValueIndex[float64]]{"minloc", mpi.MinLoc, minloc, mkLoc}, k, seed),
	)
}

// checkBarrier checks that no rank leaves a barrier before the last one
// entered it, by the wall clock every process of this host shares; the
// rank k mod n enters late.
func checkBarrier(w *mpi.Comm, only string, k int) error {
	if only != "" && only != "barrier" {
		return nil
	}
	n, me := w.Size(), w.Rank()
	if me == k%n {
		time.Sleep(2 * time.Millisecond)
	}
	enter := time.Now().UnixNano()
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	leave := time.Now().UnixNano()
	times := make([]int64, 2*n)
	if err := mpi.Allgather(w, []int64{enter, leave}, times); err != nil {
		return err
	}
	for r := range n {
		for q := range n {
			if times[2*r] > times[2*q+1] {
				return fmt.Errorf("barrier: rank %d entered after rank %d left", r, q)
			}
		}
	}
	return nil
}

// caseCollAlgorithms: every algorithm of every collective, forced in
// turn, at every count.
func caseCollAlgorithms(w *mpi.Comm) error {
	start := time.Now()
	for _, name := range mpi.Collectives() {
		for _, alg := range mpi.CollAlgorithms(name) {
			if err := mpi.SetCollAlgorithm(name, alg); err != nil {
				return err
			}
			for _, k := range collCounts {
				if err := checkAll(w, name, k, len(name)+len(alg)); err != nil {
					return fmt.Errorf("%s forced to %s: %w", name, alg, err)
				}
			}
			if err := mpi.SetCollAlgorithm(name, ""); err != nil {
				return err
			}
		}
	}
	// And the tables' own choices.
	for _, k := range collCounts {
		if err := checkAll(w, "", k, 5); err != nil {
			return fmt.Errorf("default algorithms: %w", err)
		}
	}
	if w.Rank() == 0 {
		fmt.Printf("np=%d: all algorithms checked in %v\n", w.Size(), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// Reference operations for every type.
type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

func b2i[T integer](v bool) T {
	if v {
		return 1
	}
	return 0
}

func intCases[T integer]() []redCase[T] {
	mk := func(v int) T { return T(v) }
	return []redCase[T]{
		{"sum", mpi.Sum, func(a, b T) T { return a + b }, mk},
		{"prod", mpi.Prod, func(a, b T) T { return a * b }, mk},
		{"min", mpi.Min, func(a, b T) T { return min(a, b) }, mk},
		{"max", mpi.Max, func(a, b T) T { return max(a, b) }, mk},
		{"land", mpi.Land, func(a, b T) T { return b2i[T](a != 0 && b != 0) }, mk},
		{"lor", mpi.Lor, func(a, b T) T { return b2i[T](a != 0 || b != 0) }, mk},
		{"lxor", mpi.Lxor, func(a, b T) T { return b2i[T]((a != 0) != (b != 0)) }, mk},
		{"band", mpi.Band, func(a, b T) T { return a & b }, mk},
		{"bor", mpi.Bor, func(a, b T) T { return a | b }, mk},
		{"bxor", mpi.Bxor, func(a, b T) T { return a ^ b }, mk},
	}
}

func floatCases[T ~float32 | ~float64]() []redCase[T] {
	mk := func(v int) T { return T(v) / 2 }
	return []redCase[T]{
		{"sum", mpi.Sum, func(a, b T) T { return a + b }, mk},
		{"prod", mpi.Prod, func(a, b T) T { return a * b }, mk},
		{"min", mpi.Min, func(a, b T) T { return min(a, b) }, mk},
		{"max", mpi.Max, func(a, b T) T { return max(a, b) }, mk},
	}
}

func complexCases[T ~complex64 | ~complex128]() []redCase[T] {
	mk := func(v int) T { return T(complex(float32(v), float32(v%3))) }
	return []redCase[T]{
		{"sum", mpi.Sum, func(a, b T) T { return a + b }, mk},
		{"prod", mpi.Prod, func(a, b T) T { return a * b }, mk},
	}
}

func locCases[V ~int32 | ~float32 | ~int | ~uint8]() []redCase[mpi.ValueIndex[V]] {
	mk := func(v int) mpi.ValueIndex[V] { return mpi.ValueIndex[V]{Value: V(v % 3), Index: v + 100} }
	pick := func(better func(a, b V) bool) func(a, b mpi.ValueIndex[V]) mpi.ValueIndex[V] {
		return func(a, b mpi.ValueIndex[V]) mpi.ValueIndex[V] {
			if better(b.Value, a.Value) || (b.Value == a.Value && b.Index < a.Index) {
				return b
			}
			return a
		}
	}
	return []redCase[mpi.ValueIndex[V]]{
		{"minloc", mpi.MinLoc, pick(func(a, b V) bool { return a < b }), mk},
		{"maxloc", mpi.MaxLoc, pick(func(a, b V) bool { return a > b }), mk},
	}
}

func runCases[T elem](w *mpi.Comm, cases []redCase[T]) error {
	for _, rc := range cases {
		for _, k := range []int{1, 7} {
			if err := checkReductions(w, "", rc, k, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// caseCollTypes: every datatype with every operation that applies to it,
// with the tables' algorithms; then the operations that do not apply.
func caseCollTypes(w *mpi.Comm) error {
	type celsius float64
	err := errors.Join(
		runCases(w, intCases[int]()), runCases(w, intCases[int8]()), runCases(w, intCases[int16]()),
		runCases(w, intCases[int32]()), runCases(w, intCases[int64]()), runCases(w, intCases[uint]()),
		runCases(w, intCases[uint8]()), runCases(w, intCases[uint16]()), runCases(w, intCases[uint32]()),
		runCases(w, intCases[uint64]()), runCases(w, intCases[uintptr]()),
		runCases(w, floatCases[float32]()), runCases(w, floatCases[float64]()), runCases(w, floatCases[celsius]()),
		runCases(w, complexCases[complex64]()), runCases(w, complexCases[complex128]()),
		runCases(w, locCases[int32]()), runCases(w, locCases[float32]()), runCases(w, locCases[int]()), runCases(w, locCases[uint8]()),
		runCases(w, []redCase[complex128]{{"affine", opAffine, affine, mkAffine}}),
	)
	if err != nil {
		return err
	}
	for i, c := range []error{
		mpi.Allreduce(w, []float64{1}, []float64{0}, mpi.Band),
		mpi.Allreduce(w, []complex128{1}, []complex128{0}, mpi.Max),
		mpi.Allreduce(w, []int{1}, []int{0}, mpi.MinLoc),
		mpi.Allreduce(w, []mpi.ValueIndex[int]{{}}, []mpi.ValueIndex[int]{{}}, mpi.Sum),
		mpi.Allreduce(w, []float32{1}, []float32{0}, opAffine),
	} {
		if !errors.Is(c, mpi.ErrOp) {
			return fmt.Errorf("inapplicable operation %d: want ErrOp, got %v", i, c)
		}
	}
	return mpi.Barrier(w)
}

// caseCollNonblocking: many nonblocking collectives in flight at once,
// completed out of order, overlapping blocking ones and point-to-point
// traffic on the same communicator; then Ibarrier's progress: rank 0
// starts it and then blocks in a synchronous send that rank 1 receives
// only after its own Ibarrier completed.
func caseCollNonblocking(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	const rounds = 20
	var reqs []*mpi.Request
	sums := make([][]int64, rounds)
	gathered := make([][]int32, rounds)
	bufs := make([][]float64, rounds)
	for i := range rounds {
		sums[i] = make([]int64, 1000+i)
		src := make([]int64, len(sums[i]))
		for j := range src {
			src[j] = int64(me*i + j)
		}
		q, err := mpi.Iallreduce(w, src, sums[i], mpi.Sum)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
		gathered[i] = make([]int32, n*3)
		if q, err = mpi.Iallgather(w, []int32{int32(me), int32(i), int32(me + i)}, gathered[i]); err != nil {
			return err
		}
		reqs = append(reqs, q)
		bufs[i] = make([]float64, 5)
		if me == i%n {
			for j := range bufs[i] {
				bufs[i][j] = float64(i*10 + j)
			}
		}
		if q, err = mpi.Ibcast(w, bufs[i], i%n); err != nil {
			return err
		}
		reqs = append(reqs, q)
		if i%5 == 0 {
			// A blocking collective and point-to-point traffic meanwhile.
			x := []int{1}
			if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n {
				return fmt.Errorf("blocking Allreduce among nonblocking ones: %v %v", x, err)
			}
			if _, err := mpi.Sendrecv(w, []int{me}, (me+1)%n, 5, x, (me-1+n)%n, 5); err != nil || x[0] != (me-1+n)%n {
				return fmt.Errorf("Sendrecv among nonblocking collectives: %v %v", x, err)
			}
		}
	}
	// Complete in reverse order, half by Wait, half by Waitall.
	for i := len(reqs) - 1; i >= len(reqs)/2; i-- {
		if _, err := reqs[i].Wait(); err != nil {
			return err
		}
	}
	if _, err := mpi.Waitall(reqs[:len(reqs)/2]); err != nil {
		return err
	}
	for i := range rounds {
		for j, v := range sums[i] {
			if v != int64(i*n*(n-1)/2+n*j) {
				return fmt.Errorf("Iallreduce %d element %d = %d", i, j, v)
			}
		}
		for r := range n {
			if g := gathered[i][3*r:]; g[0] != int32(r) || g[1] != int32(i) || g[2] != int32(r+i) {
				return fmt.Errorf("Iallgather %d block %d = %v", i, r, g[:3])
			}
		}
		for j, v := range bufs[i] {
			if v != float64(i*10+j) {
				return fmt.Errorf("Ibcast %d element %d = %v", i, j, v)
			}
		}
	}
	// Every other nonblocking collective once, by Test polling.
	k := 9
	in := make([]int32, n*k)
	for i := range in {
		in[i] = int32(me*1000 + i)
	}
	out := map[string][]int32{}
	reqs = nil
	start := func(name string, f func(buf []int32) (*mpi.Request, error), size int) error {
		out[name] = make([]int32, size)
		q, err := f(out[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		reqs = append(reqs, q)
		return nil
	}
	counts, displs := make([]int, n), make([]int, n)
	for r := range n {
		counts[r], displs[r] = k, r*k
	}
	err := errors.Join(
		start("Ireduce", func(b []int32) (*mpi.Request, error) { return mpi.Ireduce(w, in[:k], b, mpi.Sum, 0) }, k),
		start("Igather", func(b []int32) (*mpi.Request, error) { return mpi.Igather(w, in[:k], b, n-1) }, n*k),
		start("Igatherv", func(b []int32) (*mpi.Request, error) { return mpi.Igatherv(w, in[:k], b, counts, displs, 0) }, n*k),
		start("Iscatter", func(b []int32) (*mpi.Request, error) { return mpi.Iscatter(w, in, b, 0) }, k),
		start("Iscatterv", func(b []int32) (*mpi.Request, error) { return mpi.Iscatterv(w, in, counts, displs, b, n-1) }, k),
		start("Iallgatherv", func(b []int32) (*mpi.Request, error) { return mpi.Iallgatherv(w, in[:k], b, counts, displs) }, n*k),
		start("Ialltoall", func(b []int32) (*mpi.Request, error) { return mpi.Ialltoall(w, in, b) }, n*k),
		start("Ialltoallv", func(b []int32) (*mpi.Request, error) {
			return mpi.Ialltoallv(w, in, counts, displs, b, counts, displs)
		}, n*k),
		start("IreduceScatter", func(b []int32) (*mpi.Request, error) { return mpi.IreduceScatter(w, in, b, counts, mpi.Sum) }, k),
		start("IreduceScatterBlock", func(b []int32) (*mpi.Request, error) { return mpi.IreduceScatterBlock(w, in, b, mpi.Sum) }, k),
		start("Iscan", func(b []int32) (*mpi.Request, error) { return mpi.Iscan(w, in[:k], b, mpi.Sum) }, k),
		start("Iexscan", func(b []int32) (*mpi.Request, error) { return mpi.Iexscan(w, in[:k], b, mpi.Sum) }, k),
	)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _, err := mpi.Testall(reqs)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nonblocking collectives not complete after 30 s of Testall")
		}
	}
	sumOf := func(i int) int32 { return int32(1000*n*(n-1)/2 + n*i) }
	for i := range k {
		if me == 0 && out["Ireduce"][i] != sumOf(i) {
			return fmt.Errorf("Ireduce element %d = %d", i, out["Ireduce"][i])
		}
		if out["Iscatter"][i] != int32(me*k+i) || out["Iscatterv"][i] != int32((n-1)*1000+me*k+i) {
			return fmt.Errorf("Iscatter(v) element %d = %d, %d", i, out["Iscatter"][i], out["Iscatterv"][i])
		}
		if out["IreduceScatter"][i] != sumOf(me*k+i) || out["IreduceScatterBlock"][i] != sumOf(me*k+i) {
			return fmt.Errorf("IreduceScatter(Block) element %d", i)
		}
		scan := int32(1000*me*(me+1)/2 + (me+1)*i)
		if out["Iscan"][i] != scan || (me > 0 && out["Iexscan"][i] != scan-in[i]) {
			return fmt.Errorf("Iscan/Iexscan element %d = %d, %d", i, out["Iscan"][i], out["Iexscan"][i])
		}
	}
	for r := range n {
		for i := range k {
			want := int32(r*1000 + i)
			if (me == n-1 && out["Igather"][r*k+i] != want) || (me == 0 && out["Igatherv"][r*k+i] != want) || out["Iallgatherv"][r*k+i] != want {
				return fmt.Errorf("Igather(v)/Iallgatherv block %d element %d", r, i)
			}
			if a := int32(r*1000 + me*k + i); out["Ialltoall"][r*k+i] != a || out["Ialltoallv"][r*k+i] != a {
				return fmt.Errorf("Ialltoall(v) block %d element %d", r, i)
			}
		}
	}
	// Independent progress: rank 0's Ibarrier must complete while rank 0
	// is blocked in Ssend, since rank 1 waits for its own Ibarrier before
	// receiving.
	if n >= 2 {
		q, err := mpi.Ibarrier(w)
		if err != nil {
			return err
		}
		switch me {
		case 0:
			if err := mpi.Ssend(w, []int{42}, 1, 77); err != nil {
				return err
			}
		case 1:
			if _, err := q.Wait(); err != nil {
				return err
			}
			x := []int{0}
			if _, err := mpi.Recv(w, x, 0, 77); err != nil || x[0] != 42 {
				return fmt.Errorf("recv after Ibarrier: %v %v", x, err)
			}
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
	}
	return mpi.Barrier(w)
}

// caseCollNonblockingProgress: each step has a rank that polls or waits
// for something else (Iprobe, Testall, Testany, a Wait on a later call,
// a Wait on another communicator's call) while its nonblocking call must
// progress for the others to get there; each would hang if the call ran
// only in its own Wait.
func caseCollNonblockingProgress(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	last := n - 1
	// Iprobe alone: rank 0 polls for a message the last rank sends once
	// its Ibarrier has completed, which needs rank 0's.
	q, err := mpi.Ibarrier(w)
	if err != nil {
		return err
	}
	switch me {
	case 0:
		for {
			ok, _, err := mpi.Iprobe(w, last, 5)
			if err != nil {
				return err
			}
			if ok {
				break
			}
		}
		x := []int{0}
		if _, err := mpi.Recv(w, x, last, 5); err != nil || x[0] != 7 {
			return fmt.Errorf("recv after Iprobe: %v %v", x, err)
		}
	case last:
		if _, err := q.Wait(); err != nil {
			return err
		}
		if err := mpi.Send(w, []int{7}, 0, 5); err != nil {
			return err
		}
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	// Testall and Testany loops, with two calls in flight.
	for _, how := range []string{"Testall", "Testany"} {
		a, b := []int{me}, []int{0}
		q1, err := mpi.Ibarrier(w)
		if err != nil {
			return err
		}
		q2, err := mpi.Iallreduce(w, a, b, mpi.Sum)
		if err != nil {
			return err
		}
		reqs := []*mpi.Request{q1, q2}
		for left := 2; left > 0; {
			if how == "Testall" {
				ok, _, err := mpi.Testall(reqs)
				if err != nil {
					return err
				}
				if ok {
					left = 0
				}
				continue
			}
			i, ok, _, err := mpi.Testany(reqs)
			if err != nil {
				return err
			}
			if ok && i >= 0 {
				left--
			}
		}
		if b[0] != n*(n-1)/2 {
			return fmt.Errorf("%s: Iallreduce gave %d", how, b[0])
		}
	}
	// A Wait on the later of two calls on one communicator first (in
	// shared memory, the later waits for the earlier's turn).
	a, b, c, d := []int{me}, []int{0}, []int{2 * me}, []int{0}
	q1, err := mpi.Iallreduce(w, a, b, mpi.Sum)
	if err != nil {
		return err
	}
	q2, err := mpi.Iallreduce(w, c, d, mpi.Sum)
	if err != nil {
		return err
	}
	if _, err := q2.Wait(); err != nil {
		return err
	}
	if _, err := q1.Wait(); err != nil {
		return err
	}
	if b[0] != n*(n-1)/2 || d[0] != n*(n-1) {
		return fmt.Errorf("Waits in reverse: %d %d", b[0], d[0])
	}
	// The same with Waitall, the later call first in its list, and with
	// WaitFree.
	b[0], d[0] = 0, 0
	if q1, err = mpi.Iallreduce(w, a, b, mpi.Sum); err != nil {
		return err
	}
	if q2, err = mpi.Iallreduce(w, c, d, mpi.Sum); err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{q2, q1}); err != nil {
		return err
	}
	if q1, err = mpi.Ibarrier(w); err != nil {
		return err
	}
	if _, err := q1.WaitFree(); err != nil {
		return err
	}
	if b[0] != n*(n-1)/2 || d[0] != n*(n-1) {
		return fmt.Errorf("Waitall in reverse: %d %d", b[0], d[0])
	}
	// Crossed Waits on two communicators: rank 0 waits for the second
	// communicator's call first, the others for the first's.
	dup, err := w.Dup()
	if err != nil {
		return err
	}
	defer dup.Free()
	qa, err := mpi.Ibarrier(w)
	if err != nil {
		return err
	}
	qb, err := mpi.Ibarrier(dup)
	if err != nil {
		return err
	}
	first, second := qa, qb
	if me == 0 {
		first, second = qb, qa
	}
	if _, err := first.Wait(); err != nil {
		return err
	}
	if _, err := second.Wait(); err != nil {
		return err
	}
	// Test once, then Wait: the call may have begun in the Test.
	q, err = mpi.Ibarrier(w)
	if err != nil {
		return err
	}
	if _, _, err := q.Test(); err != nil {
		return err
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	// An override set alike at every rank between a call's start and its
	// run (begun by rank 0's Test, by the others' Wait) does not apply to
	// it: the ranks would pick apart and the call hang.
	a, b = []int{me}, []int{0}
	if q, err = mpi.Iallreduce(w, a, b, mpi.Sum); err != nil {
		return err
	}
	if me == 0 {
		if _, _, err := q.Test(); err != nil {
			return err
		}
	}
	if err := mpi.SetCollAlgorithm("allreduce", "ring"); err != nil {
		return err
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	if err := mpi.SetCollAlgorithm("allreduce", ""); err != nil {
		return err
	}
	if b[0] != n*(n-1)/2 {
		return fmt.Errorf("Iallreduce across SetCollAlgorithm gave %d", b[0])
	}
	return mpi.Barrier(w)
}

// caseCollNonblockingFree: see TestCollNonblockingFree.
func caseCollNonblockingFree(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for round := range 2 {
		c, err := w.Dup()
		if err != nil {
			return err
		}
		if err := mpi.Barrier(c); err != nil { // sets the segment up
			return err
		}
		a, b := []int{me + 1}, []int{0}
		q, err := mpi.Iallreduce(c, a, b, mpi.Sum)
		if err != nil {
			return err
		}
		if me == 0 {
			// Begun here (round 0: Test hands it to a helper, which
			// waits in the segment for the others) before the Free.
			if round == 0 {
				if _, _, err := q.Test(); err != nil {
					return err
				}
			}
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		if err := c.Free(); err != nil {
			return err
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		if b[0] != n*(n+1)/2 {
			return fmt.Errorf("round %d: Iallreduce across Free gave %d", round, b[0])
		}
	}
	return mpi.Barrier(w)
}

// caseCollNonblockingPanic: see TestCollNonblockingFree.
func caseCollNonblockingPanic(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if err := mpi.Barrier(w); err != nil { // sets the segment up
		return err
	}
	bad := mpi.NewOp("panics", func(in, inout []int) { panic("user op") }, true)
	a, b := []int{me}, []int{0}
	q, err := mpi.Iallreduce(w, a, b, bad)
	if err != nil {
		return err
	}
	func() {
		defer func() { recover() }()
		q.Wait() // a panic or an error: the call failed somewhere
	}()
	// The communicator goes on: a later shared-memory call takes its
	// turn after the failed one.
	x := []int{me}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
		return fmt.Errorf("Allreduce after the panic: %d, %v", x[0], err)
	}
	return mpi.Barrier(w)
}

// caseCollErrors: wrong arguments fail with their class, at every rank
// where they are wrong, and the ranks whose arguments were fine fail too
// instead of hanging; the communicator goes on working afterwards.
func caseCollErrors(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	check := func(what string, err error, want mpi.Class) error {
		if !errors.Is(err, want) {
			return fmt.Errorf("%s: want %v, got %v", what, want, err)
		}
		return nil
	}
	after := func(what string) error {
		x := []int{me}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
			return fmt.Errorf("after %s the communicator is broken: %v %v", what, x, err)
		}
		return nil
	}
	// Invalid root everywhere.
	if err := check("Bcast root n", mpi.Bcast(w, []int{1}, n), mpi.ErrRoot); err != nil {
		return err
	}
	if err := check("Reduce root -1", mpi.Reduce(w, []int{1}, []int{0}, mpi.Sum, -1), mpi.ErrRoot); err != nil {
		return err
	}
	if err := after("invalid roots"); err != nil {
		return err
	}
	if n < 2 {
		return nil
	}
	// Invalid root at one rank only: it fails at once with ErrRoot; the
	// others either finish (when their part of the algorithm does not
	// involve that rank) or fail with the class it reported, never hang.
	root := 0
	if me == n-1 {
		root = n + 5
	}
	err := mpi.Bcast(w, make([]int, 100000), root)
	if me == n-1 || err != nil {
		if err := check("Bcast with one bad root", err, mpi.ErrRoot); err != nil {
			return err
		}
	}
	if err := after("a bad root at one rank"); err != nil {
		return err
	}
	// Mismatched counts: rank 1 contributes fewer elements.
	for _, alg := range []string{"", "recursive_doubling", "ring", "rabenseifner", "reduce_bcast"} {
		mpi.SetCollAlgorithm("allreduce", alg)
		k := 50000
		if me == 1 {
			k = 10
		}
		x := make([]float32, k)
		err := mpi.Allreduce(w, x, x, mpi.Sum)
		if err == nil {
			return fmt.Errorf("allreduce %q with mismatched counts succeeded", alg)
		}
		if !errors.Is(err, mpi.ErrCount) && !errors.Is(err, mpi.ErrTruncate) {
			return fmt.Errorf("allreduce %q with mismatched counts: want ErrCount or ErrTruncate, got %v", alg, err)
		}
		if err := after("mismatched allreduce counts (" + alg + ")"); err != nil {
			return err
		}
	}
	mpi.SetCollAlgorithm("allreduce", "")
	for _, alg := range mpi.CollAlgorithms("bcast") {
		mpi.SetCollAlgorithm("bcast", alg)
		k := 70000
		if me == n-1 {
			k = 3
		}
		err := mpi.Bcast(w, make([]byte, k), 0)
		if err == nil && me == n-1 {
			return fmt.Errorf("bcast %s into a short buffer succeeded", alg)
		}
		if err != nil && !errors.Is(err, mpi.ErrCount) && !errors.Is(err, mpi.ErrTruncate) {
			return fmt.Errorf("bcast %s with mismatched counts: %v", alg, err)
		}
		if err := after("mismatched bcast counts (" + alg + ")"); err != nil {
			return err
		}
	}
	mpi.SetCollAlgorithm("bcast", "")
	// Mismatched collectives where one rank comes to the call after the
	// others have waited for it past the stall period (GORUN_COLL_STALL):
	// they asked it how it runs the call, and it took their query in (a
	// probe progresses its engine) before it began the call; it finds the
	// query when it begins (coll's record) and fails the call, and so do
	// they.
	if me == n-1 {
		time.Sleep(2 * time.Second) // the others query after 3 ticks of 100 ms
		if _, _, err := mpi.Iprobe(w, mpi.AnySource, mpi.AnyTag); err != nil {
			return err
		}
		err = mpi.Bcast(w, make([]int32, 8), 0)
	} else {
		x := make([]int32, 8)
		err = mpi.Allreduce(w, x, x, mpi.Sum)
	}
	if !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("allreduce against a late bcast at rank %d: want ErrCount, got %v", n-1, err)
	}
	if err := after("mismatched collectives at a late rank"); err != nil {
		return err
	}
	// Mismatched Gather counts.
	k := 5
	if me == n-1 {
		k = 6
	}
	err = mpi.Gather(w, make([]int16, k), make([]int16, 6*n), 0)
	if me == 0 && !errors.Is(err, mpi.ErrTruncate) && !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("gather with mismatched counts at the root: %v", err)
	}
	if err := after("mismatched gather counts"); err != nil {
		return err
	}
	// Buffers that overlap other than in place.
	b := make([]int, 10)
	if err := check("Allreduce overlap", mpi.Allreduce(w, b[0:5], b[2:7], mpi.Sum), mpi.ErrBuffer); err != nil {
		return err
	}
	if err := check("Alltoall ragged", mpi.Alltoall(w, make([]int, n+1), make([]int, n+1)), mpi.ErrCount); err != nil {
		return err
	}
	if err := check("Gatherv counts", mpi.Gatherv(w, []int{1}, make([]int, n), make([]int, n-1), make([]int, n), 0), mpi.ErrCount); err != nil && me == 0 {
		return err
	}
	if err := after("argument errors"); err != nil {
		return err
	}
	// A freed communicator.
	d, err := w.Dup()
	if err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	if err := check("Allreduce on a freed communicator", mpi.Allreduce(d, []int{1}, []int{0}, mpi.Sum), mpi.ErrComm); err != nil {
		return err
	}
	if _, err := mpi.Ibarrier(d); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("Ibarrier on a freed communicator: %v", err)
	}
	if err := check("Free twice", d.Free(), mpi.ErrComm); err != nil {
		return err
	}
	if err := check("Free world", w.Free(), mpi.ErrComm); err != nil {
		return err
	}
	return after("freed communicators")
}

func collEnv(np int) []string {
	env := []string{"GORUN_COLL_SEGSIZE=4096"}
	switch np {
	case 3, 5:
		env = append(env, "GORUN_COLL_FAKE_NODES=2")
	case 8:
		env = append(env, "GORUN_COLL_FAKE_NODES=3")
	}
	return env
}

var collNPs = []int{1, 2, 3, 4, 5, 8}

// TestCollAlgorithms runs the matrix on the default transports (shared
// memory between the ranks of this host) at every np, and over TCP at two.
func TestCollAlgorithms(t *testing.T) {
	for _, np := range collNPs {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			r := job{np: np, cas: "coll-algorithms", env: collEnv(np)}.ok(t)
			t.Log(strings.TrimSpace(r.stdout))
		})
	}
	// The shared-memory fan-in tree (coll/shmtree.go) at every size,
	// with small radixes so that its groups are uneven and it is three
	// levels deep at np=5; and the shared-memory barrier in dissemination
	// rounds (3 at np=5: not a power of two), whose word shares the
	// tree's done line.
	for _, tc := range []struct{ np, radix int }{{5, 2}, {4, 3}} {
		t.Run(fmt.Sprintf("shmtree/np=%d/radix=%d", tc.np, tc.radix), func(t *testing.T) {
			env := []string{"GORUN_COLL_SEGSIZE=4096", "GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_DISS=2",
				fmt.Sprint("GORUN_COLL_SHM_RADIX=", tc.radix), "GORUN_COLL_SHM_TREE_MAX=1000000"}
			r := job{np: tc.np, cas: "coll-algorithms", env: env}.ok(t)
			t.Log(strings.TrimSpace(r.stdout))
		})
	}
	// Two pretend hosts (GORUN_FAKE_HOSTS): shared memory inside each,
	// TCP between them, the hierarchical algorithms over both.
	t.Run("pretend-hosts/np=4", func(t *testing.T) {
		r := job{np: 4, cas: "coll-algorithms", env: []string{"GORUN_COLL_SEGSIZE=4096", "GORUN_FAKE_HOSTS=2"}}.ok(t)
		t.Log(strings.TrimSpace(r.stdout))
	})
	for _, np := range []int{3, 4} {
		t.Run(fmt.Sprint("tcp/np=", np), func(t *testing.T) {
			r := job{np: np, cas: "coll-algorithms", env: append(collEnv(np), "GORUN_BTL=tcp,self")}.ok(t)
			t.Log(strings.TrimSpace(r.stdout))
		})
	}
}

func TestCollTypes(t *testing.T) {
	for _, np := range []int{1, 3, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "coll-types"}.ok(t)
		})
	}
}

func TestCollNonblocking(t *testing.T) {
	for _, np := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "coll-nonblocking", env: collEnv(np)}.ok(t)
		})
	}
}

func TestCollErrors(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "coll-errors", timeout: 60 * time.Second, env: []string{"GORUN_COLL_STALL=300ms"}}.ok(t)
		})
	}
}

// caseCollNonblockingShm: once the communicator's shared-memory segment
// is set up (a blocking Barrier), nonblocking Ibcast, Ireduce, Iallgather
// and Ialltoall calls, several in flight at once and completed in
// reverse order, with a blocking Allreduce among them and an Ibarrier
// completed by Test polling; none of these four collectives is called
// blocking, so their report counts are the nonblocking calls' (the test
// checks they ran in shared memory, nbturn.go in package coll).
func caseCollNonblockingShm(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	const rounds, depth = 60, 3
	type call struct {
		q                      *mpi.Request
		bc, red, gath, a2a, at []int64
		round                  int
	}
	var inflight []call
	check := func(c call) error {
		if _, err := c.q.Wait(); err != nil {
			return err
		}
		i := c.round
		for j := range c.bc {
			if c.bc[j] != int64(i*100+j) {
				return fmt.Errorf("round %d: Ibcast element %d = %d", i, j, c.bc[j])
			}
		}
		if me == i%n && c.red[0] != int64(n*(n-1)/2+n*i) {
			return fmt.Errorf("round %d: Ireduce = %d", i, c.red[0])
		}
		for r := range n {
			if c.gath[r] != int64(r*1000+i) || c.a2a[r] != int64(r*100+me+i) {
				return fmt.Errorf("round %d: Iallgather %v, Ialltoall %v", i, c.gath, c.a2a)
			}
		}
		return nil
	}
	for i := range rounds {
		c := call{round: i, bc: make([]int64, 3), red: make([]int64, 1), gath: make([]int64, n), a2a: make([]int64, n), at: make([]int64, n)}
		if me == (i+1)%n {
			for j := range c.bc {
				c.bc[j] = int64(i*100 + j)
			}
		}
		for r := range n {
			c.at[r] = int64(me*100 + r + i)
		}
		var reqs [4]*mpi.Request
		var err [4]error
		reqs[0], err[0] = mpi.Ibcast(w, c.bc, (i+1)%n)
		reqs[1], err[1] = mpi.Ireduce(w, []int64{int64(me + i)}, c.red, mpi.Sum, i%n)
		reqs[2], err[2] = mpi.Iallgather(w, []int64{int64(me*1000 + i)}, c.gath)
		reqs[3], err[3] = mpi.Ialltoall(w, c.at, c.a2a)
		if e := errors.Join(err[:]...); e != nil {
			return e
		}
		// One request for the round: the others are waited for first.
		if _, e := mpi.Waitall(reqs[1:]); e != nil {
			return e
		}
		c.q = reqs[0]
		inflight = append(inflight, c)
		if i%7 == 3 {
			x := []int{me}
			if e := mpi.Allreduce(w, x, x, mpi.Sum); e != nil || x[0] != n*(n-1)/2 {
				return fmt.Errorf("round %d: blocking Allreduce among nonblocking calls: %v %v", i, x, e)
			}
		}
		if len(inflight) == depth {
			for k := len(inflight) - 1; k >= 0; k-- {
				if e := check(inflight[k]); e != nil {
					return e
				}
			}
			inflight = inflight[:0]
		}
	}
	for _, c := range inflight {
		if e := check(c); e != nil {
			return e
		}
	}
	q, err := mpi.Ibarrier(w)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _, err := q.Test()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Ibarrier not complete after 30 s of Test")
		}
	}
}

// TestCollNonblockingProgress: nonblocking calls progress through every
// way a program may wait or poll, deferred (the calls wait for the
// program's next wait or test, or run in their own Wait: mpi's launch)
// and begun at once on a helper goroutine (GORUN_NB_START=now, with two
// Ps a rank so that it runs beside the caller).
func TestCollNonblockingProgress(t *testing.T) {
	for _, start := range []string{"wait", "now"} {
		for _, np := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/np=%d", start, np), func(t *testing.T) {
				j := job{np: np, cas: "coll-nonblocking-progress", timeout: 60 * time.Second,
					env: []string{"GORUN_NB_START=" + start}}
				if start == "now" {
					j.flags = []string{"-x", "GOMAXPROCS=2"}
				}
				j.ok(t)
			})
		}
	}
}

// TestCollNonblockingFree: a communicator freed while its nonblocking
// calls run in shared memory (begun at one rank, not yet at the other)
// keeps its segment until they end (it was unmapped under them: a crash);
// a panic in a user's Op during a nonblocking call, recovered by the
// caller, ends the call as a failure and leaves the communicator usable
// (its turn was left registered: every later call hung).
func TestCollNonblockingFree(t *testing.T) {
	for _, np := range []int{2, 3} {
		t.Run(fmt.Sprint("free/np=", np), func(t *testing.T) {
			job{np: np, cas: "coll-nonblocking-free", timeout: 60 * time.Second}.ok(t)
		})
		t.Run(fmt.Sprint("panic/np=", np), func(t *testing.T) {
			job{np: np, cas: "coll-nonblocking-panic", timeout: 60 * time.Second}.ok(t)
		})
	}
}

// TestCollNonblockingShm: nonblocking calls run in shared memory, in turn
// with the blocking ones, with the right results.
func TestCollNonblockingShm(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			r := job{np: np, cas: "coll-nonblocking-shm", env: []string{"GORUN_COLL_REPORT=1"}}.ok(t)
			checkRan(t, r, np, []string{"bcast/shm", "reduce/shm", "allgather/shm", "alltoall/shm"}, nil)
		})
	}
}
