package mpi_test

import (
	"fmt"

	"github.com/gorun/gorun/mpi"
)

// Two groups, the even and the odd ranks of the world, joined by an
// intercommunicator: point-to-point ranks name the other group, and an
// Allreduce gives each group the other's sum. Merge makes one
// intracommunicator of both again. (Run it with gorun -np 4 or more.)
func ExampleComm_IntercommCreate() {
	w := mpi.World()
	color := w.Rank() % 2
	local, _ := w.Split(color, w.Rank())
	// Leaders: rank 0 of each group, world ranks 0 and 1.
	inter, err := local.IntercommCreate(0, w, 1-color, 99)
	if err != nil {
		return
	}
	if local.Rank() == 0 {
		mpi.Send(inter, []int{w.Rank()}, 0, 1) // to the other group's rank 0
		got := []int{0}
		mpi.Recv(inter, got, 0, 1)
		fmt.Println("the other leader is world rank", got[0])
	}
	sum := []int{w.Rank()}
	mpi.Allreduce(inter, sum, sum, mpi.Sum) // the other group's ranks
	all, _ := inter.Merge(color == 1)       // the even ranks first
	fmt.Println(sum[0], all.Rank())
}

func ExampleComm_CreateGroup() {
	w := mpi.World()
	g, _ := w.Group()
	first, _ := g.Incl([]int{0})
	// Only the members of the group call it.
	if w.Rank() == 0 {
		c, _ := w.CreateGroup(first, 7)
		fmt.Println(c.Size(), c.Rank())
	}
	// Output: 1 0
}

func ExampleKeyUniverseSize() {
	w := mpi.World()
	u, _, _ := w.GetAttr(mpi.KeyUniverseSize)
	app, ok, _ := w.GetAttr(mpi.KeyAppNum) // not set: no launcher started this process
	fmt.Println(u, app, ok)
	// Output: 1 <nil> false
}

func ExampleAllreduceInit() {
	w := mpi.World()
	x, sum := []float64{0}, []float64{0}
	q, _ := mpi.AllreduceInit(w, x, sum, mpi.Sum) // arguments checked once
	for step := 1; step <= 3; step++ {
		x[0] = float64(step) // read at each Start
		q.Start()
		q.Wait()
		fmt.Println(sum[0])
	}
	q.Free()
	// Output:
	// 1
	// 2
	// 3
}

func ExampleDistGraphCreate() {
	w := mpi.World()
	// Rank 0 names every edge of a ring, r -> r+1; the others name none.
	var sources, degrees, dests []int
	if w.Rank() == 0 {
		for r := range w.Size() {
			sources, degrees, dests = append(sources, r), append(degrees, 1), append(dests, (r+1)%w.Size())
		}
	}
	g, _ := mpi.DistGraphCreate(w, sources, degrees, dests, nil, false)
	in, _, out, _, _ := g.DistGraphNeighbors()
	fmt.Println(in, out)
	// Output: [0] [0]
}
