package mpi

import (
	"fmt"
	"testing"
)

// BenchmarkWindowSelf is osu_mbw_mr's window through the public API, on
// a singleton world (btl/self): a window of 64 Irecvs and 64 Isends to
// rank 0 itself, then Waitall. One op is one message (a send and its
// receive); allocs/op counts both.
func BenchmarkWindowSelf(b *testing.B) {
	if !Initialized() {
		if err := Init(); err != nil {
			b.Fatal(err)
		}
	}
	w := World()
	for _, size := range []int{8, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			sbuf, rbuf := make([]byte, size), make([]byte, size)
			reqs := make([]*Request, 2*64)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i += 64 {
				if err := selfWindow(w, reqs, sbuf, rbuf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// selfWindow posts len(reqs)/2 receives from and sends to this rank of
// c, then waits for all.
func selfWindow(c *Comm, reqs []*Request, sbuf, rbuf []byte) error {
	n := len(reqs) / 2
	me := c.Rank()
	var err error
	for k := range n {
		if reqs[k], err = Irecv(c, rbuf, me, 100); err != nil {
			return err
		}
	}
	for k := range n {
		if reqs[n+k], err = Isend(c, sbuf, me, 100); err != nil {
			return err
		}
	}
	_, err = Waitall(reqs)
	return err
}
