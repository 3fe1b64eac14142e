package tests

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Small blocking collectives in shared memory allocate nothing per call.
// One allocation per call (the shm call's state, which escaped) made a
// garbage collection every few thousand calls, and on ranks bound to one
// CPU each its workers delayed one call in a few thousand by 100 µs or
// more at np=32 (coll/MEASUREMENTS.md, "Scheduling noise").

func init() { rankCases["coll-allocs"] = caseCollAllocs }

func caseCollAllocs(w *mpi.Comm) error {
	const calls = 2000
	x, y := []float64{1, 2}, []float64{0, 0}
	round := func() error {
		if err := mpi.Allreduce(w, x, y, mpi.Sum); err != nil {
			return err
		}
		if err := mpi.Reduce(w, x, y, mpi.Max, 1%w.Size()); err != nil {
			return err
		}
		return mpi.Barrier(w)
	}
	for range 100 {
		if err := round(); err != nil {
			return err
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range calls {
		if err := round(); err != nil {
			return err
		}
	}
	runtime.ReadMemStats(&after)
	if y[0] != 1 && w.Rank() == 1%w.Size() {
		return fmt.Errorf("reduce: max %v, want 1", y[0])
	}
	// The failure detector's goroutines allocate meanwhile, several
	// hundred times while the membership settles after Init (memberlist's
	// codecs, a buffer per packet): allow a third of one per call.
	if n := after.Mallocs - before.Mallocs; n > calls {
		return fmt.Errorf("%d allocations in %d rounds (%d calls) of allreduce, reduce and barrier in %v: the shared-memory path allocates per call",
			n, calls, 3*calls, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func TestCollAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"flat", nil},
		{"tree", []string{"GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_RADIX=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job{np: 4, cas: "coll-allocs", env: tc.env}.ok(t)
		})
	}
}
