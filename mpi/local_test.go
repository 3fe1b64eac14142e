package mpi

import (
	"errors"
	"slices"
	"testing"
)

// TestGroupRange: RangeIncl and RangeExcl against the rank lists written
// out by hand, and their errors.
func TestGroupRange(t *testing.T) {
	g := &Group{world: []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, me: 12}
	for _, tc := range []struct {
		rs         []Range
		incl, excl []int // world ranks
		err        error
	}{
		{rs: []Range{{0, 9, 3}}, incl: []int{10, 13, 16, 19}, excl: []int{11, 12, 14, 15, 17, 18}},
		{rs: []Range{{8, 1, -3}}, incl: []int{18, 15, 12}, excl: []int{10, 11, 13, 14, 16, 17, 19}},
		{rs: []Range{{1, 2, 5}, {7, 7, 1}}, incl: []int{11, 17}, excl: []int{10, 12, 13, 14, 15, 16, 18, 19}},
		{rs: nil, incl: []int{}, excl: []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
		{rs: []Range{{0, 3, 0}}, err: ErrArg},
		{rs: []Range{{3, 0, 1}}, err: ErrArg},
		{rs: []Range{{0, 10, 1}}, err: ErrRank},
		{rs: []Range{{0, 4, 2}, {4, 5, 1}}, err: ErrRank}, // 4 twice
	} {
		in, ierr := g.RangeIncl(tc.rs)
		ex, eerr := g.RangeExcl(tc.rs)
		if tc.err != nil {
			if !errors.Is(ierr, tc.err) || !errors.Is(eerr, tc.err) {
				t.Errorf("ranges %v: %v, %v; want %v", tc.rs, ierr, eerr, tc.err)
			}
			continue
		}
		if ierr != nil || eerr != nil || !slices.Equal(in.world, tc.incl) || !slices.Equal(ex.world, tc.excl) {
			t.Errorf("ranges %v: incl %v %v, excl %v %v; want %v and %v", tc.rs, in, ierr, ex, eerr, tc.incl, tc.excl)
		}
	}
}

// TestReduceLocal: ReduceLocal applies the operation elementwise, in's
// element first, against loops written out; bad arguments fail clearly.
func TestReduceLocal(t *testing.T) {
	in := []int32{1, -2, 3, 7, 0}
	io := []int32{5, 5, -5, 7, 9}
	want := make([]int32, len(in))
	for i := range in {
		want[i] = max(in[i], io[i])
	}
	if err := ReduceLocal(in, io, Max); err != nil || !slices.Equal(io, want) {
		t.Errorf("ReduceLocal Max: %v %v, want %v", io, err, want)
	}
	// A non-commutative user op: the order of the operands shows.
	sub := NewOp("sub", func(in, inout []float64) {
		for i := range in {
			inout[i] = in[i] - inout[i]
		}
	}, false)
	a, b := []float64{10, 20}, []float64{1, 2}
	if err := ReduceLocal(a, b, sub); err != nil || !slices.Equal(b, []float64{9, 18}) {
		t.Errorf("ReduceLocal sub: %v %v, want [9 18] (in - inout)", b, err)
	}
	if err := ReduceLocal(a, b[:1], Sum); !errors.Is(err, ErrCount) {
		t.Errorf("ReduceLocal of 2 and 1 elements: %v, want ErrCount", err)
	}
	if err := ReduceLocal([]complex128{1}, []complex128{2}, Max); !errors.Is(err, ErrOp) {
		t.Errorf("ReduceLocal Max on complex: %v, want ErrOp", err)
	}
	if err := ReduceLocal(a, b, Op{}); !errors.Is(err, ErrOp) {
		t.Errorf("ReduceLocal with the zero Op: %v, want ErrOp", err)
	}
}

// TestNilComm: a nil communicator (what Split with Undefined gives the
// processes left out) answers Rank, Size and Name instead of panicking on
// a nil dereference; RecvObj refuses a value it cannot decode into before
// it takes a message (it took the message, then failed, and the message
// was lost).
func TestNilComm(t *testing.T) {
	var c *Comm
	if c.Rank() != Undefined || c.Size() != 0 || c.Name() != "MPI_COMM_NULL" {
		t.Errorf("nil communicator: rank %d, size %d, name %q", c.Rank(), c.Size(), c.Name())
	}
	var s string
	for _, v := range []any{s, nil, (*string)(nil)} {
		if _, err := RecvObj(World(), v, 0, 0); !errors.Is(err, ErrArg) {
			t.Errorf("RecvObj into %T: %v, want ErrArg", v, err)
		}
	}
}
