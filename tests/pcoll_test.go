package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: persistent collectives (MPI-4), checked against results
// computed here for every round.

func init() { rankCases["pcoll"] = casePcoll }

// casePcoll makes persistent Allreduce, Bcast, Allgather, Reduce,
// Alltoall, Scan and Barrier requests, then runs them for several rounds
// with new data each round. Each process starts them in an order of its
// own (rotated by its rank) and runs a blocking Allreduce between its
// starts, which MPI-4 allows and which only works when every request's
// runs keep to the tags reserved at its init. Every result is checked
// against the sequential one.
func casePcoll(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	const k = 1000 // past the eager limit of some transports
	x, sum := make([]float64, k), make([]float64, k)
	b := make([]int32, 7)
	ag := make([]int64, 2*n)
	mine := make([]int64, 2)
	mx := make([]int, 3)
	at, ar := make([]int, n), make([]int, n)
	sc := []int{0}
	var reqs []*mpi.Request
	add := func(q *mpi.Request, err error) error {
		reqs = append(reqs, q)
		return err
	}
	if err := errors.Join(
		add(mpi.AllreduceInit(w, x, sum, mpi.Sum)),
		add(mpi.BcastInit(w, b, n/2)),
		add(mpi.AllgatherInit(w, mine, ag)),
		add(mpi.ReduceInit(w, mx, mx, mpi.Max, n-1)),
		add(mpi.AlltoallInit(w, at, ar)),
		add(mpi.ScanInit(w, sc, sc, mpi.Sum)),
		add(mpi.BarrierInit(w)),
	); err != nil {
		return err
	}
	for round := range 4 {
		for i := range x {
			x[i] = float64(me*round + i)
		}
		if me == n/2 {
			for i := range b {
				b[i] = int32(round*100 + i)
			}
		}
		mine[0], mine[1] = int64(me+round), int64(-me)
		mx[0], mx[1], mx[2] = me*round, -me, round
		for j := range at {
			at[j] = 1000*me + j + round
		}
		sc[0] = me + round
		for i := range reqs {
			q := reqs[(i+me)%len(reqs)]
			if err := q.Start(); err != nil {
				return fmt.Errorf("round %d: Start %d: %v", round, (i+me)%len(reqs), err)
			}
			if i == 2 {
				v := []int{1}
				if err := mpi.Allreduce(w, v, v, mpi.Sum); err != nil || v[0] != n {
					return fmt.Errorf("blocking Allreduce among the starts: %v %v", v, err)
				}
			}
		}
		if err := reqs[0].Start(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Start of an active request: %v, want ErrRequest", err)
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return fmt.Errorf("round %d: %v", round, err)
		}
		// The sequential results.
		for i := range sum {
			want := float64(round*n*(n-1)/2 + n*i)
			if sum[i] != want {
				return fmt.Errorf("round %d: Allreduce element %d is %v, want %v", round, i, sum[i], want)
			}
		}
		for i := range b {
			if b[i] != int32(round*100+i) {
				return fmt.Errorf("round %d: Bcast %v", round, b)
			}
		}
		for r := range n {
			if ag[2*r] != int64(r+round) || ag[2*r+1] != int64(-r) {
				return fmt.Errorf("round %d: Allgather %v", round, ag)
			}
		}
		if me == n-1 && (mx[0] != (n-1)*round || mx[1] != 0 || mx[2] != round) {
			return fmt.Errorf("round %d: Reduce(Max) %v", round, mx)
		}
		for j := range ar {
			if ar[j] != 1000*j+me+round {
				return fmt.Errorf("round %d: Alltoall %v", round, ar)
			}
		}
		if want := me*(me+1)/2 + (me+1)*round; sc[0] != want {
			return fmt.Errorf("round %d: Scan %d, want %d", round, sc[0], want)
		}
	}
	if err := reqs[1].Free(); err != nil {
		return err
	}
	if err := reqs[1].Start(); !errors.Is(err, mpi.ErrRequest) {
		return fmt.Errorf("Start of a freed request: %v, want ErrRequest", err)
	}
	// Bad arguments fail the init at every process (all pass a bad root).
	if _, err := mpi.BcastInit(w, b, n); !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("BcastInit with root %d: %v, want ErrRoot", n, err)
	}
	if _, err := mpi.BarrierInit(mpi.World()); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

func TestPersistentColl(t *testing.T) {
	for _, np := range []int{1, 3, 4} {
		for _, btl := range []string{"sm,self", "tcp,self"} {
			t.Run(fmt.Sprintf("np=%d/btl=%s", np, btl), func(t *testing.T) {
				job{np: np, cas: "pcoll", env: []string{"GORUN_BTL=" + btl}}.ok(t)
			})
		}
	}
}
