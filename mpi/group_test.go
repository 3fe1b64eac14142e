package mpi

import (
	"errors"
	"slices"
	"testing"
)

func TestGroupTranslateRanks(t *testing.T) {
	a := &Group{world: []int{0, 1, 2, 3}, me: 0}
	b := &Group{world: []int{3, 1}, me: 0}
	for _, tc := range []struct {
		ranks   []int
		want    []int
		wantErr error
	}{
		{ranks: []int{0, 1, 3}, want: []int{Undefined, 1, 0}},
		{ranks: []int{ProcNull}, want: []int{ProcNull}},
		{ranks: []int{3, ProcNull, 2}, want: []int{0, ProcNull, Undefined}},
		{ranks: nil, want: []int{}},
		{ranks: []int{4}, wantErr: ErrRank},
		{ranks: []int{-1}, wantErr: ErrRank},
		{ranks: []int{Undefined}, wantErr: ErrRank},
	} {
		got, err := GroupTranslateRanks(a, tc.ranks, b)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("GroupTranslateRanks(%v): want %v, got %v, %v", tc.ranks, tc.wantErr, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("GroupTranslateRanks(%v) = %v, %v; want %v", tc.ranks, got, err, tc.want)
		}
	}
	// ProcNull translates to ProcNull into the empty group too.
	if got, err := GroupTranslateRanks(a, []int{ProcNull}, GroupEmpty); err != nil || !slices.Equal(got, []int{ProcNull}) {
		t.Errorf("GroupTranslateRanks(ProcNull) into the empty group = %v, %v", got, err)
	}
}
