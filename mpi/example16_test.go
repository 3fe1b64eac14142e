package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorun/gorun/mpi"
)

func ExampleMprobe() {
	w := mpi.World()
	mpi.Send(w, []int16{4, 5, 6}, 0, 2)
	// Take the message out of matching, size the buffer, receive it: no
	// other goroutine's probe or receive can get it in between.
	m, st, _ := mpi.Mprobe(w, mpi.AnySource, mpi.AnyTag)
	buf := make([]int16, mpi.GetCount[int16](st))
	mpi.Mrecv(buf, m)
	fmt.Println(buf, "tag", st.Tag)
	// Output: [4 5 6] tag 2
}

func ExampleRequest_WaitContext() {
	w := mpi.World()
	buf := make([]int, 1)
	q, _ := mpi.Irecv(w, buf, 0, 9) // nothing is sent with tag 9
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	st, err := q.WaitContext(ctx)
	// The receive was withdrawn: a later message with tag 9 goes to the
	// next receive.
	fmt.Println(errors.Is(err, context.DeadlineExceeded), st.Cancelled())
	// Output: true true
}

func ExampleSendInit() {
	w := mpi.World()
	out, in := []int{0}, []int{0}
	send, _ := mpi.SendInit(w, out, 0, 1)
	recv, _ := mpi.RecvInit(w, in, 0, 1)
	reqs := []*mpi.Request{recv, send}
	for i := range 3 {
		out[0] = 10 * i
		mpi.Startall(reqs)
		mpi.Waitall(reqs)
		fmt.Print(in[0], " ")
	}
	send.Free()
	recv.Free()
	fmt.Println()
	// Output: 0 10 20
}

func ExampleWaitall_errors() {
	w := mpi.World()
	a, b := make([]int, 2), make([]int, 1)
	qa, _ := mpi.Irecv(w, a, 0, 1)
	qb, _ := mpi.Irecv(w, b, 0, 2) // one element short
	mpi.Send(w, []int{1, 2}, 0, 1)
	mpi.Send(w, []int{3, 4}, 0, 2)
	_, err := mpi.Waitall([]*mpi.Request{qa, qb})
	var re *mpi.RequestErrors
	if errors.As(err, &re) {
		fmt.Println(re.Errs[0] == nil, errors.Is(re.Errs[1], mpi.ErrTruncate))
	}
	// Output: true true
}

func ExampleGatherObj() {
	w := mpi.World()
	names, _ := mpi.GatherObj(w, map[string]int{"rank": w.Rank()}, 0)
	fmt.Println(names)
	// Output: [map[rank:0]]
}

func ExampleComm_Idup() {
	w := mpi.World()
	d, q, _ := w.Idup()
	// ... other work, other collectives on w ...
	if _, err := q.Wait(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(d.Size(), d.Rank())
	// Output: 1 0
}
