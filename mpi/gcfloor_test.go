package mpi

import (
	"os"
	"runtime"
	"testing"
)

// TestGCFloor: at the message rate (windows of 64 Isend/Irecv pairs to
// this rank, 100k messages, about 18 MiB of requests and statuses) the
// collector does not run while Init's floor holds, where it ran every few
// MiB without it. Skipped when the environment steers the collector.
func TestGCFloor(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GORUN_GC_FLOOR") != "" {
		t.Skip("GOGC, GOMEMLIMIT or GORUN_GC_FLOOR set: the floor is not the default one")
	}
	w := initSingleton(t)
	if len(gcFloor) != pGCFloor() {
		t.Fatalf("floor of %d bytes held, want %d", len(gcFloor), pGCFloor())
	}
	runtime.GC() // the test binary's own garbage out of the way
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	me := w.Rank()
	buf := make([]byte, 8)
	reqs := make([]*Request, 128)
	for range 100_000 / 64 {
		for k := 0; k < 128; k += 2 {
			var err error
			if reqs[k], err = Irecv(w, buf, me, 3); err != nil {
				t.Fatal(err)
			}
			if reqs[k+1], err = Isend(w, buf, me, 3); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Waitall(reqs); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc < 8<<20 {
		t.Fatalf("only %d bytes allocated: the test no longer exercises the collector", alloc)
	}
	if n := after.NumGC - before.NumGC; n > 1 {
		t.Errorf("%d collections for %d bytes allocated, with a floor of %d bytes", n, alloc, len(gcFloor))
	}
}
