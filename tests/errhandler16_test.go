package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: the error handler of a communicator applies to the calls
// wired last: request completion (Wait, Test, Waitall, Waitany,
// Waitsome), matched probes, topology calls, windows and the ULFM calls,
// and each error reaches it once, also when a nested call's error is
// returned by the outer call.

func init() { rankCases["errhandler16"] = caseErrhandler16 }

func caseErrhandler16(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	d, err := w.Dup()
	if err != nil {
		return err
	}
	var seen []error
	on := d // the communicator the handler must be called on
	d.SetErrhandler(mpi.NewErrhandler(func(c *mpi.Comm, err error) {
		if c != on {
			err = fmt.Errorf("handler called on %s: %w", c.Name(), err)
		}
		seen = append(seen, err)
	}))
	// expect runs f, which must fail with class want, the handler having
	// seen that error, once.
	expect := func(what string, want mpi.Class, f func() error) error {
		before := len(seen)
		on = d
		err := f()
		if !errors.Is(err, want) {
			return fmt.Errorf("%s: %v, want %v", what, err, want)
		}
		if len(seen) != before+1 || seen[before] != err {
			return fmt.Errorf("%s: the handler saw %v, want the call's error once", what, seen[before:])
		}
		return nil
	}
	right, left := (me+1)%n, (me-1+n)%n
	long := []int{1, 2, 3}
	checks := []struct {
		what string
		want mpi.Class
		f    func() error
	}{
		{"Wait of a truncated receive", mpi.ErrTruncate, func() error {
			q, err := mpi.Irecv(d, make([]int, 1), left, 1)
			if err != nil {
				return err
			}
			if err := mpi.Send(d, long, right, 1); err != nil {
				return err
			}
			_, err = q.Wait()
			return err
		}},
		{"Waitall of a truncated receive", mpi.ErrTruncate, func() error {
			q, err := mpi.Irecv(d, make([]int, 1), left, 2)
			if err != nil {
				return err
			}
			s, err := mpi.Isend(d, long, right, 2)
			if err != nil {
				return err
			}
			_, err = mpi.Waitall([]*mpi.Request{s, q})
			return err
		}},
		{"Waitany of a truncated receive", mpi.ErrTruncate, func() error {
			if err := mpi.Send(d, long, right, 3); err != nil {
				return err
			}
			q, err := mpi.Irecv(d, make([]int, 1), left, 3)
			if err != nil {
				return err
			}
			_, _, err = mpi.Waitany([]*mpi.Request{q})
			return err
		}},
		{"Mprobe of a bad rank", mpi.ErrRank, func() error { _, _, err := mpi.Mprobe(d, n+3, 0); return err }},
		{"Mrecv into a short buffer", mpi.ErrTruncate, func() error {
			if err := mpi.Send(d, long, right, 4); err != nil {
				return err
			}
			m, _, err := mpi.Mprobe(d, left, 4)
			if err != nil {
				return err
			}
			_, err = mpi.Mrecv(make([]int, 1), m)
			return err
		}},
		{"Start of a request that is not persistent", mpi.ErrRequest, func() error {
			q, err := mpi.Isend(d, long, mpi.ProcNull, 0)
			if err != nil {
				return err
			}
			return q.Start()
		}},
		{"CartCreate with a bad dimension", mpi.ErrArg, func() error { _, err := mpi.CartCreate(d, []int{0}, []bool{false}, false); return err }},
		{"CartShift without a topology", mpi.ErrArg, func() error { _, _, err := d.CartShift(0, 1); return err }},
		{"DistGraphNeighbors without a topology", mpi.ErrTopology, func() error { _, _, _, _, err := d.DistGraphNeighbors(); return err }},
		{"Put past the window", mpi.ErrRMARange, func() error {
			win, err := mpi.WinAllocate[int](d, 2)
			if err != nil {
				return err
			}
			defer win.Free()
			// The handler of the window's communicator, which it
			// inherited from d.
			on = win.Comm()
			if err := win.Fence(); err != nil {
				return err
			}
			perr := win.Put(long, right, 0)
			if err := win.Fence(); err != nil {
				return err
			}
			return perr
		}},
		{"Agree on an intercommunicator", mpi.ErrComm, func() error {
			local, inter, err := evenOdd(d)
			if err != nil {
				return err
			}
			defer local.Free()
			defer inter.Free()
			on = inter // which inherited d's handler
			_, err = inter.Agree(1)
			return err
		}},
	}
	for _, c := range checks {
		if c.what == "Agree on an intercommunicator" && n < 2 {
			continue // no second group to join
		}
		if err := expect(c.what, c.want, c.f); err != nil {
			return err
		}
	}
	// A nested call's error goes through the handler once: Split's
	// Allgather fails on the freed communicator; Split returns it.
	e, err := d.Dup()
	if err != nil {
		return err
	}
	e.Free()
	before := len(seen)
	if _, err := e.Split(0, 0); !errors.Is(err, mpi.ErrComm) || len(seen) != before+1 {
		return fmt.Errorf("Split of a freed communicator: %v, handler calls %d (want 1)", err, len(seen)-before)
	}
	return d.Free()
}

func TestErrhandlerWired(t *testing.T) {
	for _, np := range []int{1, 3} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "errhandler16"}.ok(t) })
	}
}
