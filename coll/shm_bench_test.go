package coll

import (
	"fmt"
	"os"
	"testing"

	_ "github.com/gorun/gorun/btl/sm"
)

// BenchmarkShmNp2 times the shared-memory collectives of two ranks in
// this process (a goroutine each, over the segment the ranks of a job
// map): the line transfers between two cores and this package's own
// bookkeeping a call, without package mpi's. Each op is one call at both
// ranks.
func BenchmarkShmNp2(b *testing.B) {
	if !shmOn() {
		b.Skip("GORUN_COLL_SHM=0")
	}
	const np, ctx = 2, 12
	SetJob(fmt.Sprintf("collbench%d", os.Getpid()))
	engs := openEnginesOn(b, np, "sm")
	comms := make([]Comm, np)
	for r := range np {
		comms[r] = NewComm(engs[r], ctx, []int{0, 1}, r, nil)
		b.Cleanup(comms[r].sh.shm.close)
	}
	// Each rank's arguments and view are made once: made per call they
	// escape (and the collector they bring along is no part of a call's
	// cost: package mpi keeps them in a pool).
	cases := []struct {
		name string
		call func(*Comm, *Args) error
		args func(x []byte) Args
	}{
		{"barrier", Barrier, func([]byte) Args { return Args{} }},
		{"allreduce-8B", Allreduce, func(x []byte) Args { return Args{Recv: x[:8], Op: byteMax{}, Elem: 1} }},
		{"allgather-8B", Allgather, func(x []byte) Args { return Args{Send: x[:8], Recv: x[8:24]} }},
		{"bcast-8B", Bcast, func(x []byte) Args { return Args{Recv: x[:8], Root: 0} }},
	}
	for _, cs := range cases {
		b.Run(cs.name, func(b *testing.B) {
			ranks(b, engs, func(r int) {
				a := cs.args(make([]byte, 24))
				v := new(Comm) // the call's view, reused as package mpi does
				for i := 0; i < b.N; i++ {
					*v = comms[r].Begin()
					if err := v.Prepare(); err != nil {
						b.Error(err)
						return
					}
					if err := cs.call(v, &a); err != nil {
						b.Errorf("rank %d: %v", r, err)
						return
					}
				}
			})
		})
	}
}
