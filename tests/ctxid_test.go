package tests

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Context ids under MPI_THREAD_MULTIPLE (issue 15, item 1).

func init() {
	rankCases["ctx-concurrent"] = caseCtxConcurrent
	rankCases["ctx-exhaust"] = caseCtxExhaust
	rankCases["ctx-stale"] = caseCtxStale
}

// caseCtxConcurrent: goroutines create communicators at once (Dup, Split,
// Create) from different parents that share processes, each process
// starting them in its own order; the traffic of every new communicator
// stays on it. With ids agreed as "the highest id anyone has used", two
// constructors running together at a process agreed on the same id and
// their messages crossed.
func caseCtxConcurrent(w *mpi.Comm) error {
	me := w.Rank()
	const parents, rounds = 6, 8
	// Parents that overlap: dups of world, and the halves of world.
	bases := make([]*mpi.Comm, parents)
	for g := range bases {
		var err error
		if g%3 == 2 {
			bases[g], err = w.Split(me%2, 0)
		} else {
			bases[g], err = w.Dup()
		}
		if err != nil {
			return err
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	errs := make([]error, parents)
	var wg sync.WaitGroup
	for g := range bases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = ctxRounds(bases[g], g, rounds, me)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

// ctxRounds makes rounds communicators from b, one at a time, and checks
// a ring exchange and an Allreduce on each before freeing it.
func ctxRounds(b *mpi.Comm, g, rounds, worldRank int) error {
	for i := range rounds {
		// Each process starts its constructors in its own order.
		time.Sleep(time.Duration((worldRank*7+g*3+i)%5) * 200 * time.Microsecond)
		var c *mpi.Comm
		var err error
		switch i % 3 {
		case 0:
			c, err = b.Dup()
		case 1:
			c, err = b.Split(0, -b.Rank()) // reversed order
		default:
			grp, gerr := b.Group()
			if gerr != nil {
				return gerr
			}
			c, err = b.Create(grp)
		}
		if err != nil {
			return fmt.Errorf("parent %d round %d: %w", g, i, err)
		}
		n, r := c.Size(), c.Rank()
		want := []int{g, i, (r - 1 + n) % n}
		q, err := mpi.Isend(c, []int{g, i, r}, (r+1)%n, 5)
		if err != nil {
			return err
		}
		got := make([]int, 3)
		if _, err := mpi.Recv(c, got, (r-1+n)%n, 5); err != nil {
			return fmt.Errorf("parent %d round %d: Recv: %w", g, i, err)
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		if got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			return fmt.Errorf("parent %d round %d: received [parent round rank] %v, want %v: traffic of another communicator", g, i, got, want)
		}
		x := []int{1000*g + i}
		if err := mpi.Allreduce(c, x, x, mpi.Sum); err != nil {
			return fmt.Errorf("parent %d round %d: Allreduce: %w", g, i, err)
		}
		if x[0] != n*(1000*g+i) {
			return fmt.Errorf("parent %d round %d: Allreduce gave %d, want %d", g, i, x[0], n*(1000*g+i))
		}
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

func TestCtxConcurrent(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "ctx-concurrent", timeout: 60 * time.Second}.ok(t)
		})
	}
}

// caseCtxExhaust: with every context id in use, a constructor fails with
// ErrOther on every process (no hang); after one Free, the next
// constructor succeeds (the freed id leaves its quarantine when nothing
// else is left), and freeing and creating in a loop goes on without end.
func caseCtxExhaust(w *mpi.Comm) error {
	var all []*mpi.Comm
	for {
		c, err := w.Dup()
		if err != nil {
			if !errors.Is(err, mpi.ErrOther) {
				return fmt.Errorf("Dup number %d: %v, want class ErrOther", len(all)+1, err)
			}
			break
		}
		all = append(all, c)
		if len(all) > 10000 {
			return fmt.Errorf("10000 communicators alive and Dup still succeeds")
		}
	}
	if len(all) < 1000 {
		return fmt.Errorf("only %d communicators before ids ran out", len(all))
	}
	if err := all[7].Free(); err != nil {
		return err
	}
	c, err := w.Dup()
	if err != nil {
		return fmt.Errorf("Dup after a Free: %w", err)
	}
	all[7] = c
	for _, c := range all {
		if err := c.Free(); err != nil {
			return err
		}
	}
	for i := range 5000 {
		c, err := w.Dup()
		if err != nil {
			return fmt.Errorf("Dup/Free loop, round %d: %w", i, err)
		}
		if err := c.Free(); err != nil {
			return err
		}
	}
	x := []int{1}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != w.Size() {
		return fmt.Errorf("Allreduce after: %v %v", x, err)
	}
	return nil
}

func TestCtxExhaust(t *testing.T) { job{np: 2, cas: "ctx-exhaust"}.ok(t) }

// caseCtxStale: what a freed communicator left behind (a message nobody
// received, a large one whose rendezvous nobody answered, a receive still
// posted) must not reach the communicators its context id serves later:
// the id comes back after ctxQuarantine (256) other frees. Before the
// purge, a Dup created 256 frees later received the old message.
func caseCtxStale(w *mpi.Comm) error {
	me := w.Rank()
	d, err := w.Dup()
	if err != nil {
		return err
	}
	var big, posted *mpi.Request
	switch me {
	case 1:
		if err := mpi.Send(d, []int{12345}, 0, 7); err != nil {
			return err
		}
		if big, err = mpi.Isend(d, make([]byte, 1<<20), 0, 8); err != nil {
			return err
		}
	case 0:
		if posted, err = mpi.Irecv(d, make([]int, 1), 1, 9); err != nil {
			return err
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	for i := range 300 {
		e, err := w.Dup()
		if err != nil {
			return err
		}
		if me == 0 {
			ok, st, err := mpi.Iprobe(e, mpi.AnySource, mpi.AnyTag)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("communicator %d after the freed one found its message: source %d tag %d, %d bytes", i, st.Source, st.Tag, st.Bytes())
			}
		}
		// Traffic on the new communicator still flows.
		x := []int{me + i}
		if err := mpi.Allreduce(e, x, x, mpi.Sum); err != nil {
			return err
		}
		if err := e.Free(); err != nil {
			return err
		}
	}
	switch me {
	case 0:
		// Its communicator's id went back into use: the receive fails.
		if _, err := posted.Wait(); !errors.Is(err, mpi.ErrComm) {
			return fmt.Errorf("a receive posted on a communicator freed 300 frees ago: %v, want ErrComm", err)
		}
	case 1:
		// Nobody will answer the rendezvous: the send fails instead of
		// waiting forever.
		if _, err := big.Wait(); err == nil {
			return errors.New("a large send on a freed communicator nobody received completed without error")
		}
	}
	return mpi.Barrier(w)
}

func TestCtxStale(t *testing.T) { job{np: 2, cas: "ctx-stale"}.ok(t) }
