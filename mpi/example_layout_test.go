package mpi_test

import (
	"fmt"

	"github.com/gorun/gorun/mpi"
)

func ExampleVector() {
	w := mpi.World()
	// A 3×4 row-major matrix; column 1 is every 4th element from index 1.
	m := []float64{
		0, 1, 2, 3,
		10, 11, 12, 13,
		20, 21, 22, 23,
	}
	col := mpi.Vector(3, 1, 4)
	// Send column 1 (the layout starts at the slice's index 0, so the
	// slice starts at the column) and receive it as a contiguous row.
	row := make([]float64, 3)
	mpi.SendrecvLayout(w, m[1:], col, 0, 0, row, mpi.Contiguous(3), 0, 0)
	fmt.Println(row)
	// Output: [1 11 21]
}

func ExampleSubarray() {
	w := mpi.World()
	// The 2×2 tile at row 1, column 2 of a 4×4 grid goes to the top-left
	// corner of another grid.
	var a, b [16]int
	for i := range a {
		a[i] = i
	}
	tile := mpi.Subarray([]int{4, 4}, []int{2, 2}, []int{1, 2}, mpi.OrderC)
	corner := mpi.Subarray([]int{4, 4}, []int{2, 2}, []int{0, 0}, mpi.OrderC)
	q, _ := mpi.IrecvLayout(w, b[:], corner, 0, 7)
	mpi.SendLayout(w, a[:], tile, 0, 7)
	st, _ := q.Wait()
	fmt.Println(st.Count(), b[:2], b[4:6])
	// Output: 4 [6 7] [10 11]
}

func ExampleLayout_Of() {
	// Vector's stride counts extents of the inner layout: every other
	// (x, y) pair of a slice of pairs.
	pairs := []int{0, 0, 1, 10, 2, 20, 3, 30}
	even := mpi.Vector(2, 1, 2).Of(mpi.Contiguous(2))
	packed, _ := mpi.Pack(nil, pairs, even)
	fmt.Println(packed, even.Size(), even.Extent())
	// Output: [0 0 2 20] 4 6
}

func ExampleLayout_Resized() {
	// A column of a 3×3 matrix, resized to extent 1 so that copies of it
	// are consecutive columns: the matrix's transpose, packed.
	m := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	col := mpi.Vector(3, 1, 3).Resized(0, 1)
	t, _ := mpi.Pack(nil, m, mpi.Contiguous(3).Of(col))
	fmt.Println(t)
	// Output: [1 4 7 2 5 8 3 6 9]
}
