package tests

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: attribute caching and error handlers per communicator.

func init() {
	rawCases["finalize-hook"] = caseFinalizeHook
	rankCases["attr"] = caseAttr
	rankCases["errhandler"] = caseErrhandler
	rankCases["errfatal"] = caseErrFatal
}

// caseAttr: three keys on a duplicate of the world, their callbacks
// logging what they are called with. Dup copies in the order the values
// were set (a key whose CopyFunc declines is left out, a freed key is
// still copied); SetAttr over a value deletes the old one; a failing
// DeleteFunc fails DeleteAttr and Free and leaves the values; a failing
// CopyFunc fails Dup and deletes what it had copied; Free deletes in
// reverse order.
func caseAttr(w *mpi.Comm) error {
	var mu sync.Mutex
	var log []string
	note := func(f string, a ...any) { mu.Lock(); log = append(log, fmt.Sprintf(f, a...)); mu.Unlock() }
	take := func() []string { mu.Lock(); defer mu.Unlock(); l := log; log = nil; return l }
	failDel, failCopy := false, false
	name := map[mpi.Keyval]string{}
	mk := func(n string, keep bool) (mpi.Keyval, error) {
		k, err := mpi.CreateKeyval(func(old *mpi.Comm, k mpi.Keyval, v any) (any, bool, error) {
			note("copy %s %v", name[k], v)
			if failCopy && n == "b" {
				return nil, false, errors.New("copy refused")
			}
			return v.(int) + 100, keep, nil
		}, func(c *mpi.Comm, k mpi.Keyval, v any) error {
			note("del %s %v", name[k], v)
			if failDel && n == "b" {
				return errors.New("delete refused")
			}
			return nil
		})
		name[k] = n
		return k, err
	}
	a, err := mk("a", true)
	if err != nil {
		return err
	}
	b, _ := mk("b", true)
	x, _ := mk("x", false)
	want := func(what string, w ...string) error {
		if got := take(); !slices.Equal(got, w) {
			return fmt.Errorf("%s: callbacks %q, want %q", what, got, w)
		}
		return nil
	}
	c, err := w.Dup()
	if err != nil {
		return err
	}
	if v, ok, err := c.GetAttr(mpi.KeyTagUB); err != nil || !ok || v.(int) != mpi.TagUB {
		return fmt.Errorf("GetAttr(KeyTagUB) = %v, %v, %v", v, ok, err)
	}
	if err := c.SetAttr(mpi.KeyTagUB, 1); !errors.Is(err, mpi.ErrKeyval) {
		return fmt.Errorf("SetAttr(KeyTagUB): %v, want ErrKeyval", err)
	}
	// Set order: b, x, a (keys were made a, b, x).
	for _, kv := range []struct {
		k mpi.Keyval
		v int
	}{{b, 2}, {x, 3}, {a, 1}} {
		if err := c.SetAttr(kv.k, kv.v); err != nil {
			return err
		}
	}
	if err := want("first SetAttrs"); err != nil {
		return err
	}
	if err := c.SetAttr(a, 10); err != nil {
		return err
	}
	if err := want("SetAttr over a value", "del a 1"); err != nil {
		return err
	}
	if v, ok, err := c.GetAttr(a); err != nil || !ok || v != 10 {
		return fmt.Errorf("GetAttr(a) = %v, %v, %v after SetAttr(a, 10)", v, ok, err)
	}
	// a was set again last: copy order b, x, a.
	if err := mpi.FreeKeyval(x); err != nil {
		return err
	}
	if _, _, err := c.GetAttr(x); !errors.Is(err, mpi.ErrKeyval) {
		return fmt.Errorf("GetAttr of a freed key: %v, want ErrKeyval", err)
	}
	d, err := c.Dup()
	if err != nil {
		return err
	}
	if err := want("Dup", "copy b 2", "copy x 3", "copy a 10"); err != nil {
		return err
	}
	for k, v := range map[mpi.Keyval]int{a: 110, b: 102} {
		if got, ok, err := d.GetAttr(k); err != nil || !ok || got != v {
			return fmt.Errorf("dup GetAttr(%s) = %v, %v, %v, want %d", name[k], got, ok, err, v)
		}
	}
	failDel = true
	if err := d.DeleteAttr(b); err == nil || !strings.Contains(err.Error(), "delete refused") {
		return fmt.Errorf("DeleteAttr with a failing DeleteFunc: %v", err)
	}
	if _, ok, _ := d.GetAttr(b); !ok {
		return errors.New("a failed DeleteAttr lost the value")
	}
	// Free deletes a, then fails at b and leaves d usable.
	if err := d.Free(); err == nil || !strings.Contains(err.Error(), "delete refused") {
		return fmt.Errorf("Free with a failing DeleteFunc: %v", err)
	}
	if err := want("failed Free", "del b 102", "del a 110", "del b 102"); err != nil {
		return err
	}
	if err := mpi.Barrier(d); err != nil {
		return fmt.Errorf("d after a failed Free: %v", err)
	}
	failDel = false
	if err := d.Free(); err != nil {
		return err
	}
	if err := want("Free", "del b 102"); err != nil {
		return err
	}
	failCopy = true
	if _, err := c.Dup(); err == nil || !strings.Contains(err.Error(), "copy refused") {
		return fmt.Errorf("Dup with a failing CopyFunc: %v", err)
	}
	if err := want("failed Dup", "copy b 2"); err != nil {
		return err
	}
	failCopy = false
	// Idup copies too, before its request completes.
	e, q, err := c.Idup()
	if err != nil {
		return err
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	if v, ok, err := e.GetAttr(a); err != nil || !ok || v != 110 {
		return fmt.Errorf("Idup GetAttr(a) = %v, %v, %v", v, ok, err)
	}
	take()
	if err := e.Free(); err != nil {
		return err
	}
	// Free order: reverse of set order in e (b then a were copied).
	if err := want("Free of the Idup", "del a 110", "del b 102"); err != nil {
		return err
	}
	if err := c.Free(); err != nil {
		return err
	}
	if err := want("Free of c", "del a 10", "del x 3", "del b 2"); err != nil {
		return err
	}
	return nil
}

// TestAttr runs caseAttr.
func TestAttr(t *testing.T) { job{np: 3, cas: "attr"}.ok(t) }

// caseErrhandler: a handler set on the world sees a Send to a rank that
// does not exist (and the error is still returned), a Dup inherits it,
// and ErrorsReturn puts things back.
func caseErrhandler(w *mpi.Comm) error {
	var seen []error
	var on []*mpi.Comm
	h := mpi.NewErrhandler(func(c *mpi.Comm, err error) { seen = append(seen, err); on = append(on, c) })
	if w.Errhandler() != mpi.ErrorsReturn {
		return fmt.Errorf("default handler %v, want ErrorsReturn", w.Errhandler())
	}
	if err := w.SetErrhandler(h); err != nil {
		return err
	}
	err := mpi.Send(w, []int{1}, w.Size()+5, 0)
	if !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Send to rank %d: %v, want ErrRank", w.Size()+5, err)
	}
	if len(seen) != 1 || seen[0] != err || on[0] != w {
		return fmt.Errorf("handler saw %v on %v, want the Send's error once on the world", seen, on)
	}
	d, err := w.Dup()
	if err != nil {
		return err
	}
	if d.Errhandler() != h {
		return errors.New("Dup did not inherit the handler")
	}
	if err := mpi.Bcast(d, []int{1}, -1); !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("Bcast with root -1: %v, want ErrRoot", err)
	}
	if len(seen) != 2 || !errors.Is(seen[1], mpi.ErrRoot) || on[1] != d {
		return fmt.Errorf("handler saw %v on %v after the Bcast", seen, on)
	}
	if err := d.Free(); err != nil {
		return err
	}
	if err := mpi.Barrier(d); !errors.Is(err, mpi.ErrComm) || len(seen) != 3 {
		return fmt.Errorf("Barrier on a freed communicator: %v, handler calls %d", err, len(seen))
	}
	if err := w.SetErrhandler(mpi.ErrorsReturn); err != nil {
		return err
	}
	if _, err := mpi.Recv(w, []int{0}, -7, 0); !errors.Is(err, mpi.ErrRank) || len(seen) != 3 {
		return fmt.Errorf("with ErrorsReturn: %v, handler calls %d (want 3)", err, len(seen))
	}
	return mpi.Barrier(w)
}

// TestErrhandler runs caseErrhandler.
func TestErrhandler(t *testing.T) { job{np: 2, cas: "errhandler"}.ok(t) }

// caseErrFatal: rank 1 sets ErrorsAreFatal and sends to a rank that does
// not exist; the job must end with the error on stderr and the class
// (ErrRank) as exit code, while rank 0 waits in a Recv that never ends.
func caseErrFatal(w *mpi.Comm) error {
	if w.Rank() == 1 {
		if err := w.SetErrhandler(mpi.ErrorsAreFatal); err != nil {
			return err
		}
		err := mpi.Send(w, []int{1}, 42, 0)
		return fmt.Errorf("Send to rank 42 returned %v under ErrorsAreFatal", err)
	}
	_, err := mpi.Recv(w, []int{0}, 1, 0)
	return fmt.Errorf("Recv returned %v: rank 1 should have ended the job", err)
}

// TestErrhandlerFatal runs caseErrFatal.
func TestErrhandlerFatal(t *testing.T) {
	r := job{np: 2, cas: "errfatal"}.run(t)
	// gorun's line says what ended the job (it said "called
	// mpi.Abort(6)", which the program never did).
	if r.code != int(mpi.ErrRank) || !strings.Contains(r.stderr, "rank 42 is not in MPI_COMM_WORLD") || !strings.Contains(r.stderr, "ended the job: MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD (status 6)") || strings.Contains(r.stderr, "called mpi.Abort") {
		t.Fatalf("exit %d (want %d), stderr:\n%s", r.code, int(mpi.ErrRank), r.stderr)
	}
}

// caseFinalizeHook: MPI's hook for code at termination. Three attributes
// on Self, set in the order b, a, c; Finalize deletes them first, in the
// reverse order (c, a, b), while MPI still works (each DeleteFunc runs a
// Barrier on the world). With GORUN_TEST_HOOK_FAIL=1 a's DeleteFunc fails:
// Finalize returns its error, the deletion stops there (b's callback does
// not run), and Finalize still finishes (no rank hangs).
func caseFinalizeHook() int {
	fail := os.Getenv("GORUN_TEST_HOOK_FAIL") == "1"
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "Init:", err)
		return 1
	}
	w := mpi.World()
	var log []string
	var keys []mpi.Keyval
	for _, n := range []string{"a", "b", "c"} {
		k, err := mpi.CreateKeyval(nil, func(*mpi.Comm, mpi.Keyval, any) error {
			if err := mpi.Barrier(mpi.World()); err != nil {
				return fmt.Errorf("barrier in %s's delete callback: %w", n, err)
			}
			log = append(log, n)
			if fail && n == "a" {
				return errors.New("a refused")
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "CreateKeyval:", err)
			return 1
		}
		keys = append(keys, k)
	}
	for _, i := range []int{1, 0, 2} {
		if err := mpi.Self().SetAttr(keys[i], i); err != nil {
			fmt.Fprintln(os.Stderr, "SetAttr:", err)
			return 1
		}
	}
	me := w.Rank()
	err := mpi.Finalize()
	want := []string{"c", "a", "b"}
	if fail {
		want = want[:2]
		if err == nil || !strings.Contains(err.Error(), "a refused") {
			fmt.Fprintf(os.Stderr, "rank %d: Finalize = %v, want a's delete error\n", me, err)
			return 1
		}
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", me, err)
		return 1
	}
	if !slices.Equal(log, want) {
		fmt.Fprintf(os.Stderr, "rank %d: delete callbacks ran %q, want %q\n", me, log, want)
		return 1
	}
	return 0
}

func TestFinalizeHook(t *testing.T) {
	job{np: 2, cas: "finalize-hook"}.ok(t)
	job{np: 2, cas: "finalize-hook", env: []string{"GORUN_TEST_HOOK_FAIL=1"}}.ok(t)
}
