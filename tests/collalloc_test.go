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
	elapsed := time.Since(start)
	if y[0] != 1 && w.Rank() == 1%w.Size() {
		return fmt.Errorf("reduce: max %v, want 1", y[0])
	}
	// The failure detector's goroutines allocate meanwhile (memberlist's
	// codecs, a buffer per packet), about 1000-2000 times a second per
	// rank on the 2-core VM at np=4, in proportion to the time, not to the
	// calls: on a loaded machine the loop took 3.3 s instead of 0.1 and
	// they alone passed the old bound of one allocation a round. So the
	// same span of idle time after the loop measures them, and what the
	// loop allocated beyond twice that must stay under one allocation
	// every two rounds (a collective that allocated on every call would
	// add 2000).
	var idle, idleEnd runtime.MemStats
	runtime.ReadMemStats(&idle)
	time.Sleep(min(elapsed, 5*time.Second))
	runtime.ReadMemStats(&idleEnd)
	n := int64(after.Mallocs - before.Mallocs)
	bg := int64(idleEnd.Mallocs - idle.Mallocs)
	if n-2*bg > calls/2 {
		return fmt.Errorf("%d allocations in %d rounds (%d calls) of allreduce, reduce and barrier in %v, %d in as long idle after: the shared-memory path allocates per call",
			n, calls, 3*calls, elapsed.Round(time.Millisecond), bg)
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
