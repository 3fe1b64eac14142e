package tests

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// caseWaitallFree: windows of 64 nonblocking messages, each window
// completed with WaitallFree, as the OSU bandwidth programs do. Every
// payload arrives intact in its own buffer (a reused request must carry
// its new operation, not its old one), every entry is nil afterwards,
// the persistent request of each window stays, and once warm a window
// allocates next to nothing on either side (the requests come back; rank
// 0 sends every other window with Issend, which needs its requests).
func caseWaitallFree(w *mpi.Comm) error {
	const window, windows, warm = 64, 3000, 300
	me := w.Rank()
	if me > 1 {
		return mpi.Barrier(w)
	}
	peer := 1 - me
	bufs := make([][]int64, window)
	for k := range bufs {
		bufs[k] = make([]int64, 2)
	}
	reqs := make([]*mpi.Request, window+1)
	ack := []int64{0}
	// A persistent receive of the ack, started every window: WaitallFree
	// must leave it in place, inactive, ready to start again.
	var pers *mpi.Request
	var err error
	if me == 0 {
		pers, err = mpi.RecvInit(w, ack, peer, 2)
	} else {
		pers, err = mpi.SendInit(w, ack, peer, 2)
	}
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	var before uint64
	var start time.Time
	for i := range windows {
		if i == warm {
			runtime.ReadMemStats(&ms)
			before, start = ms.TotalAlloc, time.Now()
		}
		for k := range window {
			if me == 0 {
				bufs[k][0], bufs[k][1] = int64(i), int64(k)
				// Every other window synchronous: an Issend takes a
				// request of its own (a small Isend mostly goes out at
				// once and returns a completed shared one), so the
				// sender's reuse is measured too.
				if i%2 == 1 {
					reqs[k], err = mpi.Issend(w, bufs[k], peer, 1)
				} else {
					reqs[k], err = mpi.Isend(w, bufs[k], peer, 1)
				}
			} else {
				bufs[k][0], bufs[k][1] = -1, -1
				reqs[k], err = mpi.Irecv(w, bufs[k], peer, 1)
			}
			if err != nil {
				return err
			}
		}
		if err := pers.Start(); err != nil {
			return err
		}
		reqs[window] = pers
		if err := mpi.WaitallFree(reqs); err != nil {
			return err
		}
		for k, q := range reqs[:window] {
			if q != nil {
				return fmt.Errorf("window %d: entry %d not nil after WaitallFree", i, k)
			}
			if me == 1 && (bufs[k][0] != int64(i) || bufs[k][1] != int64(k)) {
				return fmt.Errorf("window %d: message %d holds %v, want [%d %d]", i, k, bufs[k], i, k)
			}
		}
		if reqs[window] != pers {
			return fmt.Errorf("window %d: the persistent request's entry changed to %v", i, reqs[window])
		}
	}
	if err := waitallFreeKinds(w, peer); err != nil {
		return err
	}
	runtime.ReadMemStats(&ms)
	elapsed := time.Since(start)
	if raceEnabled { // allocation counts mean little there
		return firstError(pers.Free(), mpi.Barrier(w))
	}
	// The failure detector allocates meanwhile, by the second: on a loaded
	// machine the loop took seconds and that alone passed 16 bytes a
	// message (idleAllocs).
	_, bg := idleAllocs(elapsed)
	// Bytes, not allocations: requests come 32 to an allocation (slabs),
	// 152 bytes each; given back, none is made.
	perMsg := (float64(ms.TotalAlloc-before) - bg) / float64((windows-warm)*window)
	if perMsg > 40 { // a request every four messages would pass 38
		return fmt.Errorf("rank %d: %.1f bytes allocated a message with WaitallFree, want next to none (a request is 152)", me, perMsg)
	}
	fmt.Printf("rank %d: %.2f bytes allocated a message\n", me, perMsg)
	if err := pers.Free(); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

// waitallFreeKinds: a request given back by a receive and taken by a
// send must be a send (Cancel fails, as for every send), and windows that
// mix synchronous sends and receives on both ranks deliver every payload.
func waitallFreeKinds(w *mpi.Comm, peer int) error {
	me := w.Rank()
	for i := range 200 {
		in, out := []int64{-1}, []int64{int64(1000*me + i)}
		reqs := make([]*mpi.Request, 2)
		var err error
		if reqs[0], err = mpi.Issend(w, out, peer, 3); err != nil {
			return err
		}
		if reqs[1], err = mpi.Irecv(w, in, peer, 3); err != nil {
			return err
		}
		if err := mpi.WaitallFree(reqs); err != nil {
			return err
		}
		if want := int64(1000*peer + i); in[0] != want {
			return fmt.Errorf("mixed window %d: got %d, want %d", i, in[0], want)
		}
		// The next Issend takes the request the receive gave back (the
		// engine's free list is LIFO, and WaitallFree gives the entries
		// back in order): it must be a send in every respect.
		if reqs[0], err = mpi.Issend(w, out, peer, 4); err != nil {
			return err
		}
		if err := reqs[0].Cancel(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("window %d: Cancel of an Issend on a reused request: %v, want ErrRequest", i, err)
		}
		if reqs[1], err = mpi.Irecv(w, in, peer, 4); err != nil {
			return err
		}
		if err := mpi.WaitallFree(reqs); err != nil {
			return err
		}
	}
	return nil
}

// caseWaitallFreeGoroutines: four goroutines a rank run windows of
// Issends and Irecvs, each on its own tag, and give them back with
// WaitallFree at once, so that a request one goroutine gives back is
// taken by another's next call while the first is still in WaitallFree:
// under -race this failed while WaitallFree read the entries after the
// engine lock was released (found by review). Payloads arrive intact.
func caseWaitallFreeGoroutines(w *mpi.Comm) error {
	me := w.Rank()
	if me > 1 {
		return mpi.Barrier(w)
	}
	peer := 1 - me
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]*mpi.Request, 16)
			bufs := make([][]int64, len(reqs))
			for k := range bufs {
				bufs[k] = make([]int64, 1)
			}
			for i := range 300 {
				for k := range reqs {
					var err error
					if me == 0 {
						bufs[k][0] = int64(i*100 + k)
						reqs[k], err = mpi.Issend(w, bufs[k], peer, 10+g)
					} else {
						bufs[k][0] = -1
						reqs[k], err = mpi.Irecv(w, bufs[k], peer, 10+g)
					}
					if err != nil {
						errs[g] = err
						return
					}
				}
				if err := mpi.WaitallFree(reqs); err != nil {
					errs[g] = err
					return
				}
				for k := range bufs {
					if me == 1 && bufs[k][0] != int64(i*100+k) {
						errs[g] = fmt.Errorf("goroutine %d, window %d, message %d: got %d", g, i, k, bufs[k][0])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

func init() {
	rankCases["waitall-free"] = caseWaitallFree
	rankCases["waitall-free-goroutines"] = caseWaitallFreeGoroutines
}

func TestWaitallFree(t *testing.T) {
	r := job{np: 2, cas: "waitall-free"}.ok(t)
	t.Log(r.stdout)
	job{np: 2, cas: "waitall-free-goroutines"}.ok(t)
}
