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
	// The failure detector allocates meanwhile, by the second, not by the
	// call: on a loaded machine the loop took 3.3 s instead of 0.1 and it
	// alone passed the old bound of one allocation a round. So
	// idleAllocs estimates it, and what the loop allocated beyond that must
	// stay under one allocation every two rounds (a collective allocating
	// on every call adds 2000). The estimate is rough under load: a
	// measurement is repeated up to three times, and one within the bound
	// at every rank passes.
	var last error
	for range 3 {
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
		n := float64(after.Mallocs - before.Mallocs)
		bg, _ := idleAllocs(elapsed)
		// Every rank repeats while any failed (the others would wait for
		// it in the next attempt's calls).
		bad := []int32{b2i[int32](n-bg > calls/2)}
		anyBad := []int32{0}
		if err := mpi.Allreduce(w, bad, anyBad, mpi.Max); err != nil {
			return err
		}
		if anyBad[0] == 0 {
			return nil
		}
		last = nil
		if bad[0] == 0 {
			continue
		}
		last = fmt.Errorf("%.0f allocations in %d rounds (%d calls) of allreduce, reduce and barrier in %v, about %.0f of them the failure detector's (idle after): the shared-memory path allocates per call",
			n, calls, 3*calls, elapsed.Round(time.Millisecond), bg)
	}
	return last
}

// idleAllocs estimates what the process allocates by itself (the failure
// detector: about 1000 allocations and 0.85 MB a second a rank on the
// 2-core VM, idle) over a span d: it sleeps as long (up to 2 s) and scales
// what was allocated meanwhile to d. It returns the allocations and the
// bytes.
func idleAllocs(d time.Duration) (mallocs, bytes float64) {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	t0 := time.Now()
	time.Sleep(min(d, 2*time.Second))
	runtime.ReadMemStats(&b)
	scale := float64(d) / float64(time.Since(t0))
	return float64(b.Mallocs-a.Mallocs) * scale, float64(b.TotalAlloc-a.TotalAlloc) * scale
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
