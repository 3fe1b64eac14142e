package mpi_test

import (
	"fmt"

	"github.com/gorun/gorun/mpi"
)

func ExampleNeighborAlltoall() {
	w := mpi.World()
	// A periodic ring of one process: this rank is its own -1 and +1
	// neighbour, and still gets the block sent in each direction in the
	// right place: block 0 comes from the -1 neighbour, which sent it as
	// its block for its +1 neighbour (block 1), and the other way round.
	ring, _ := mpi.CartCreate(w, []int{1}, []bool{true}, false)
	recv := make([]int, 2)
	mpi.NeighborAlltoall(ring, []int{10, 20}, recv)
	fmt.Println(recv)
	// Not periodic: both neighbours are ProcNull, nothing arrives.
	line, _ := mpi.CartCreate(w, []int{1}, []bool{false}, false)
	recv = []int{-1, -1}
	mpi.NeighborAlltoall(line, []int{10, 20}, recv)
	fmt.Println(recv)
	// Output:
	// [20 10]
	// [-1 -1]
}

func ExampleDistGraphCreateAdjacent() {
	w := mpi.World()
	// A graph of one process with two edges to itself: the k-th listing
	// as a destination pairs with the k-th listing as a source.
	g, _ := mpi.DistGraphCreateAdjacent(w, []int{0, 0}, nil, []int{0, 0}, nil, false)
	buf := make([]int, 2)
	mpi.NeighborAlltoall(g, []int{1, 2}, buf)
	src, _, dst, _, _ := g.DistGraphNeighbors()
	fmt.Println(buf, src, dst)
	// Output: [1 2] [0 0] [0 0]
}
