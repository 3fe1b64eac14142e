package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// The examples run as a singleton world (no gorun), where rank 0 messages
// itself; under `gorun -np N` the same calls reach other ranks.
func TestMain(m *testing.M) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func Example() {
	// A program starts with mpi.Init and ends with mpi.Finalize:
	//
	//	if err := mpi.Init(); err != nil { log.Fatal(err) }
	//	defer mpi.Finalize()
	w := mpi.World()
	fmt.Printf("rank %d of %d\n", w.Rank(), w.Size())
	// Output: rank 0 of 1
}

func ExampleIsend() {
	w := mpi.World()
	out := []float64{1.5, 2.5, 3.5}
	in := make([]float64, 3)
	recv, _ := mpi.Irecv(w, in, mpi.AnySource, mpi.AnyTag)
	send, _ := mpi.Isend(w, out, 0, 7)
	if _, err := mpi.Waitall([]*mpi.Request{recv, send}); err != nil {
		fmt.Println(err)
	}
	st, _ := recv.Wait()
	fmt.Println(in, "from", st.Source, "tag", st.Tag, "count", st.Count())
	// Output: [1.5 2.5 3.5] from 0 tag 7 count 3
}

func ExampleRecv_truncate() {
	w := mpi.World()
	mpi.Send(w, []int32{1, 2, 3, 4}, 0, 1) // small: buffered eagerly
	small := make([]int32, 2)
	_, err := mpi.Recv(w, small, 0, 1)
	fmt.Println(small, errors.Is(err, mpi.ErrTruncate))
	// Output: [1 2] true
}

func ExampleProbe() {
	w := mpi.World()
	mpi.Send(w, []uint16{10, 20, 30}, 0, 3)
	st, _ := mpi.Probe(w, mpi.AnySource, 3)
	buf := make([]uint16, mpi.GetCount[uint16](st))
	mpi.Recv(w, buf, st.Source, st.Tag)
	fmt.Println(buf)
	// Output: [10 20 30]
}

func ExampleAllreduce() {
	w := mpi.World()
	x := []float64{float64(w.Rank() + 1), 2}
	mpi.Allreduce(w, x, x, mpi.Sum) // in place: the same slice twice
	fmt.Println(x)
	// Output: [1 2]
}

func ExampleSendObj() {
	type point struct{ X, Y int }
	w := mpi.World()
	mpi.SendObj(w, map[string]point{"a": {1, 2}}, 0, 5)
	var got map[string]point
	mpi.RecvObj(w, &got, 0, 5)
	fmt.Println(got["a"].X, got["a"].Y)
	// Output: 1 2
}

func ExampleNewOp() {
	w := mpi.World()
	// A non-commutative op is applied in rank order.
	concat := mpi.NewOp("first-nonzero", func(in, inout []int) {
		for i := range inout {
			if in[i] != 0 {
				inout[i] = in[i]
			}
		}
	}, false)
	x := []int{0, 5}
	mpi.Allreduce(w, x, x, concat)
	fmt.Println(x)
	// Output: [0 5]
}
