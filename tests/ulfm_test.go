package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Fault tolerance under gorun --enable-recovery (issue 15: ULFM).

func init() {
	rankCases["ulfm-shrink"] = caseULFMShrink
	rankCases["ulfm-revoke"] = caseULFMRevoke
	rankCases["ulfm-anysource"] = caseULFMAnySource
	rankCases["ulfm-off"] = caseULFMOff
	rankCases["ulfm-bcast"] = caseULFMBcast
	rankCases["ulfm-first"] = caseULFMFirst
}

// caseULFMFirst: rank 2 dies while the others make a communicator's first
// collective (a Gather to rank 0 on a Dup of the world), which runs the
// communicator's shared-memory set-up: every survivor's call must fail
// with ErrProcFailed. Rank 3 waited for ever in the set-up for rank 1,
// alive but gone from the call (its part of the set-up had failed on rank
// 2), since the set-up ignored the call's aborts.
func caseULFMFirst(w *mpi.Comm) error {
	d, err := w.Dup()
	if err != nil {
		return err
	}
	if w.Rank() == 2 {
		time.Sleep(300 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	out := make([]int, d.Size())
	err = mpi.Gather(d, []int{d.Rank()}, out, 0)
	if !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("Gather with rank 2 dead: %v; want ErrProcFailed", err)
	}
	fmt.Printf("ulfm-first: rank %d failed as it should: %v\n", w.Rank(), err)
	return nil
}

const (
	ulfmIters  = 200
	ulfmVictim = 3
	ulfmDieAt  = 60
)

// caseULFMShrink: an Allreduce loop in which world rank 3 kills itself
// (SIGKILL) at iteration 60. The survivors see the failure, revoke, shrink,
// agree where to restart (the lowest iteration every survivor completed)
// and finish on the shrunk communicator. Every committed iteration i must
// hold (i+1) * the sum of (world rank + 1) over the members that computed
// it, and the survivors must end with the same history.
func caseULFMShrink(w *mpi.Comm) error {
	me := w.Rank()
	c := w
	wg, err := w.Group()
	if err != nil {
		return err
	}
	acc := make([]float64, 0, ulfmIters)
	used := make([]float64, 0, ulfmIters) // sum of (world rank + 1) of c's members
	memberSum := func(c *mpi.Comm) float64 {
		g, err := c.Group()
		if err != nil {
			panic(err)
		}
		ranks := make([]int, c.Size())
		for i := range ranks {
			ranks[i] = i
		}
		wr, err := mpi.GroupTranslateRanks(g, ranks, wg)
		if err != nil {
			panic(err)
		}
		s := 0.0
		for _, r := range wr {
			s += float64(r + 1)
		}
		return s
	}
	shrinks := 0
	var sawFault, shrunk time.Time
	for i := 0; i < ulfmIters; {
		if me == ulfmVictim && i == ulfmDieAt {
			if dir := os.Getenv("GORUN_TEST_DIR"); dir != "" {
				os.WriteFile(filepath.Join(dir, "killed"), []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
		x := []float64{float64(me+1) * float64(i+1)}
		err := mpi.Allreduce(c, x, x, mpi.Sum)
		if err == nil {
			acc = append(acc, x[0])
			used = append(used, memberSum(c))
			i++
			continue
		}
		if !errors.Is(err, mpi.ErrProcFailed) && !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("iteration %d: %w (want ErrProcFailed or ErrRevoked)", i, err)
		}
		if shrinks == 0 {
			sawFault = time.Now()
		}
		if shrinks++; shrinks > 3 {
			return fmt.Errorf("iteration %d: shrunk 3 times already: %w", i, err)
		}
		if err := c.Revoke(); err != nil {
			return fmt.Errorf("revoke: %w", err)
		}
		nc, err := c.Shrink()
		if err != nil {
			return fmt.Errorf("shrink after %d iterations: %w", i, err)
		}
		if f := c.GetFailed(); !slices.Equal(f, []int{ulfmVictim}) && c == w {
			return fmt.Errorf("GetFailed on world = %v, want [%d]", f, ulfmVictim)
		}
		if nc.Size() != 4 {
			return fmt.Errorf("shrunk communicator has %d members, want 4", nc.Size())
		}
		// Restart from the lowest iteration every survivor completed.
		done := []int64{int64(len(acc))}
		if err := mpi.Allreduce(nc, done, done, mpi.Min); err != nil {
			return fmt.Errorf("agree on the restart point: %w", err)
		}
		if done[0] < ulfmDieAt-1 {
			return fmt.Errorf("restart point %d is before the failure at iteration %d", done[0], ulfmDieAt)
		}
		i = int(done[0])
		acc, used = acc[:i], used[:i]
		if c != w {
			c.Free()
		}
		c = nc
		shrunk = time.Now()
	}
	if shrinks == 0 {
		return fmt.Errorf("finished all %d iterations without seeing rank %d fail", ulfmIters, ulfmVictim)
	}
	for i, v := range acc {
		if want := float64(i+1) * used[i]; v != want {
			return fmt.Errorf("iteration %d: sum %v, want %v", i, v, want)
		}
	}
	if used[0] != 15 || used[len(used)-1] != 11 {
		return fmt.Errorf("first iteration over members summing %v (want 15: all five), last %v (want 11: without rank 3)", used[0], used[len(used)-1])
	}
	// The same history everywhere.
	total := []float64{0}
	for _, v := range acc {
		total[0] += v
	}
	lo, hi := []float64{total[0]}, []float64{total[0]}
	if err := mpi.Allreduce(c, lo, lo, mpi.Min); err != nil {
		return err
	}
	if err := mpi.Allreduce(c, hi, hi, mpi.Max); err != nil {
		return err
	}
	if lo[0] != hi[0] {
		return fmt.Errorf("survivors disagree: totals from %v to %v", lo[0], hi[0])
	}
	if me == 0 {
		fmt.Printf("ulfm: survivors finished %d iterations, restart after %d, total %v\n", len(acc), firstDrop(used), total[0])
		if b, err := os.ReadFile(filepath.Join(os.Getenv("GORUN_TEST_DIR"), "killed")); err == nil {
			ns, _ := strconv.ParseInt(string(b), 10, 64)
			killed := time.Unix(0, ns)
			fmt.Printf("ulfm: rank 0 saw the error %v after the kill, and had shrunk and agreed on the restart %v after it\n",
				sawFault.Sub(killed).Round(time.Microsecond), shrunk.Sub(killed).Round(time.Microsecond))
		}
	}
	return nil
}

// caseULFMBcast: a loop of 8-byte bcasts from rank 0 of the
// communicator, through the shared-memory ring whose root runs ahead of
// its readers (coll/shm.go, "Bcasts that run ahead"), in which world rank
// 3, a reader, kills itself at iteration 60. No survivor depends on rank
// 3 for its data: the root learns of the failure when it comes back to a
// slot rank 3 did not read, and the other readers through the root. Every
// survivor must see it (nothing hangs), revoke, shrink, agree where to
// restart, and end with every iteration's value.
func caseULFMBcast(w *mpi.Comm) error {
	me := w.Rank()
	c := w
	got := make([]int64, 0, ulfmIters)
	shrinks, sawAt, restart := 0, -1, -1
	for i := 0; i < ulfmIters; {
		if me == ulfmVictim && i == ulfmDieAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
		buf := []int64{-1}
		if c.Rank() == 0 {
			buf[0] = int64(1000 + i)
		}
		err := mpi.Bcast(c, buf, 0)
		if err == nil {
			if buf[0] != int64(1000+i) {
				return fmt.Errorf("iteration %d: got %d, want %d", i, buf[0], 1000+i)
			}
			got = append(got, buf[0])
			i++
			continue
		}
		if !errors.Is(err, mpi.ErrProcFailed) && !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("iteration %d: %w (want ErrProcFailed or ErrRevoked)", i, err)
		}
		if shrinks++; shrinks > 3 {
			return fmt.Errorf("iteration %d: shrunk 3 times already: %w", i, err)
		}
		sawAt = i
		if err := c.Revoke(); err != nil {
			return fmt.Errorf("revoke: %w", err)
		}
		nc, err := c.Shrink()
		if err != nil {
			return fmt.Errorf("shrink after %d iterations: %w", i, err)
		}
		if nc.Size() != w.Size()-1 {
			return fmt.Errorf("shrunk communicator has %d members, want %d", nc.Size(), w.Size()-1)
		}
		done := []int64{int64(len(got))}
		if err := mpi.Allreduce(nc, done, done, mpi.Min); err != nil {
			return fmt.Errorf("agree on the restart point: %w", err)
		}
		i = int(done[0])
		restart = i
		got = got[:i]
		if c != w {
			c.Free()
		}
		c = nc
	}
	if shrinks == 0 {
		return fmt.Errorf("finished all %d iterations without seeing rank %d fail", ulfmIters, ulfmVictim)
	}
	for i, v := range got {
		if v != int64(1000+i) {
			return fmt.Errorf("iteration %d: kept %d", i, v)
		}
	}
	fmt.Printf("ulfm-bcast: rank %d saw the failure in iteration %d, restarted at %d\n", me, sawAt, restart)
	return nil
}

func firstDrop(used []float64) int {
	for i, u := range used {
		if u != used[0] {
			return i
		}
	}
	return len(used)
}

// caseULFMRevoke: rank 2 revokes a communicator while rank 1 waits for a
// message from it and rank 0 waits on AnySource: both come out with
// ErrRevoked; later operations fail at once; Agree and Shrink still work.
func caseULFMRevoke(w *mpi.Comm) error {
	c, err := w.Dup()
	if err != nil {
		return err
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	buf := []int{0}
	// A rendezvous offer nobody has matched when c is revoked: refused,
	// its sender fails with ErrRevoked instead of waiting.
	var big *mpi.Request
	if w.Rank() == 1 {
		if big, err = mpi.Isend(c, make([]float64, 1<<17), 0, 9); err != nil {
			return err
		}
	}
	switch w.Rank() {
	case 0:
		_, err = mpi.Recv(c, buf, mpi.AnySource, 7)
	case 1:
		_, err = mpi.Recv(c, buf, 2, 7)
	case 2:
		time.Sleep(200 * time.Millisecond)
		err = c.Revoke()
		if err == nil {
			err = mpi.ErrRevoked // what the others see
		}
	}
	if !errors.Is(err, mpi.ErrRevoked) {
		return fmt.Errorf("blocked receive on the revoked communicator: %v, want ErrRevoked", err)
	}
	if !c.IsRevoked() {
		return errors.New("IsRevoked is false after the revocation")
	}
	if big != nil {
		if _, err := big.Wait(); !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("unmatched 1 MiB send on the revoked communicator: %v, want ErrRevoked", err)
		}
	}
	if _, _, err := mpi.Mprobe(c, mpi.AnySource, 9); !errors.Is(err, mpi.ErrRevoked) {
		return fmt.Errorf("Mprobe on a revoked communicator: %v, want ErrRevoked", err)
	}
	if err := mpi.Send(c, buf, (w.Rank()+1)%3, 1); !errors.Is(err, mpi.ErrRevoked) {
		return fmt.Errorf("send on a revoked communicator: %v, want ErrRevoked", err)
	}
	if err := mpi.Barrier(c); !errors.Is(err, mpi.ErrRevoked) {
		return fmt.Errorf("barrier on a revoked communicator: %v, want ErrRevoked", err)
	}
	flag, err := c.Agree(w.Rank() + 1) // 1 & 2 & 3 = 0
	if err != nil || flag != 0 {
		return fmt.Errorf("Agree on the revoked communicator: %d, %v; want 0, nil", flag, err)
	}
	flag, err = c.Agree(6)
	if err != nil || flag != 6 {
		return fmt.Errorf("Agree(6): %d, %v; want 6, nil", flag, err)
	}
	nc, err := c.Shrink()
	if err != nil {
		return err
	}
	if nc.Size() != 3 || nc.Rank() != w.Rank() {
		return fmt.Errorf("shrunk: rank %d of %d, want %d of 3", nc.Rank(), nc.Size(), w.Rank())
	}
	if err := c.Free(); err != nil {
		return fmt.Errorf("free the revoked communicator: %w", err)
	}
	x := []int{w.Rank()}
	if err := mpi.Allreduce(nc, x, x, mpi.Sum); err != nil || x[0] != 3 {
		return fmt.Errorf("allreduce on the shrunk communicator: %v, %v", x, err)
	}
	return nc.Free()
}

// caseULFMAnySource: rank 2 leaves without Finalize. A receive from
// AnySource on world then fails with ErrProcFailed (the message might
// have been rank 2's) until AckFailed; then it gets rank 1's message.
func caseULFMAnySource(w *mpi.Comm) error {
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	buf := []int{0}
	switch w.Rank() {
	case 2:
		os.Exit(4)
	case 1:
		// Send only once rank 0's first receive has failed (it says so
		// on tag 8): sent earlier, the message could match that receive
		// before rank 0 learned of rank 2's failure.
		if _, err := mpi.Recv(w, buf, 0, 8); err != nil {
			return err
		}
		if err := mpi.Send(w, []int{11}, 0, 5); err != nil {
			return err
		}
		// Rank 0's Sendrecv toward the failed rank is over: send what
		// its receive would have taken had it been left posted.
		if _, err := mpi.Recv(w, buf, 0, 7); err != nil {
			return err
		}
		if err := mpi.Send(w, []int{12}, 0, 6); err != nil {
			return err
		}
	case 0:
		_, err := mpi.Recv(w, buf, mpi.AnySource, 5)
		if !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("receive from AnySource after rank 2 failed: %v, want ErrProcFailed", err)
		}
		if err := mpi.Send(w, []int{0}, 1, 8); err != nil {
			return err
		}
		if f := w.GetFailed(); !slices.Equal(f, []int{2}) {
			return fmt.Errorf("GetFailed = %v, want [2]", f)
		}
		n, err := w.AckFailed()
		if err != nil || n != 1 {
			return fmt.Errorf("AckFailed: %d, %v; want 1", n, err)
		}
		st, err := mpi.Recv(w, buf, mpi.AnySource, 5)
		if err != nil || buf[0] != 11 || st.Source != 1 {
			return fmt.Errorf("receive from AnySource after AckFailed: %v from %d, %v; want 11 from 1", buf, st.Source, err)
		}
		if _, err := mpi.Recv(w, buf, 2, 5); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("receive from the failed rank: %v, want ErrProcFailed", err)
		}
		// A Sendrecv whose send cannot start (to the failed rank) fails
		// and takes its receive back: the next message from rank 1 on
		// that tag goes to the next receive, not into old.
		old := []int{-7}
		if _, err := mpi.Sendrecv(w, []int{1}, 2, 6, old, 1, 6); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("Sendrecv to the failed rank: %v, want ErrProcFailed", err)
		}
		if err := mpi.Send(w, []int{0}, 1, 7); err != nil {
			return err
		}
		if _, err := mpi.Recv(w, buf, 1, 6); err != nil || buf[0] != 12 || old[0] != -7 {
			return fmt.Errorf("after the failed Sendrecv: received %v (%v), its buffer %v; want 12 and -7 untouched", buf, err, old)
		}
	}
	flag, err := w.Agree(1)
	if w.Rank() == 0 && (err != nil || flag != 1) {
		return fmt.Errorf("Agree after AckFailed: %d, %v; want 1, nil", flag, err)
	}
	if w.Rank() == 1 && (!errors.Is(err, mpi.ErrProcFailed) || flag != 1) {
		return fmt.Errorf("Agree without AckFailed: %d, %v; want 1 and ErrProcFailed", flag, err)
	}
	return nil
}

// caseULFMOff: without --enable-recovery, Agree and Shrink say why they
// cannot work, and Revoke revokes locally.
func caseULFMOff(w *mpi.Comm) error {
	if mpi.RecoveryEnabled() {
		return errors.New("RecoveryEnabled without --enable-recovery")
	}
	if _, err := w.Agree(1); !errors.Is(err, mpi.ErrOther) || !strings.Contains(err.Error(), "--enable-recovery") {
		return fmt.Errorf("Agree without --enable-recovery: %v", err)
	}
	if _, err := w.Shrink(); !errors.Is(err, mpi.ErrOther) {
		return fmt.Errorf("Shrink without --enable-recovery: %v", err)
	}
	return nil
}

func TestULFMShrink(t *testing.T) {
	r := job{np: 5, cas: "ulfm-shrink", flags: []string{"--enable-recovery"}, timeout: 90 * time.Second}.run(t)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (the survivors finished)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 3") || !strings.Contains(r.stderr, "goes on without it") {
		t.Errorf("stderr does not report rank 3's loss:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "ulfm: survivors finished 200 iterations") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	t.Logf("%s(%v)", r.stdout, r.elapsed.Round(time.Millisecond))
	checkNothingLeft(t, r)
}

func TestULFMBcast(t *testing.T) {
	r := job{np: 4, cas: "ulfm-bcast", flags: []string{"--enable-recovery"}, timeout: 90 * time.Second}.run(t)
	if r.code != 0 || !strings.Contains(r.stderr, "rank 3") || strings.Count(r.stdout, "ulfm-bcast: rank") != 3 {
		t.Fatalf("exit %d, want 0 with rank 3's loss reported and three survivors done\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("%s(%v)", r.stdout, r.elapsed.Round(time.Millisecond))
	checkNothingLeft(t, r)
}

func TestULFMFirst(t *testing.T) {
	for _, btl := range []string{"", "self,tcp"} {
		t.Run(btl, func(t *testing.T) {
			var env []string
			if btl != "" {
				env = []string{"GORUN_BTL=" + btl}
			}
			r := job{np: 4, cas: "ulfm-first", env: env, flags: []string{"--enable-recovery"}, timeout: 60 * time.Second}.run(t)
			if r.code != 0 || strings.Count(r.stdout, "failed as it should") != 3 {
				t.Fatalf("exit %d, want 0 with three survivors failing their Gather\nstdout:\n%s\nstderr:\n%.3000s", r.code, r.stdout, r.stderr)
			}
			// The launcher's verdict, where a survivor's error quotes
			// it, once prefixed "gorun: gorun: ".
			if strings.Contains(r.stdout, "gorun: gorun:") {
				t.Errorf("a doubled prefix:\n%s", r.stdout)
			}
			t.Logf("%s", r.stdout)
		})
	}
}

func TestULFMRevoke(t *testing.T) {
	job{np: 3, cas: "ulfm-revoke", flags: []string{"--enable-recovery"}, timeout: 60 * time.Second}.ok(t)
}

func TestULFMAnySource(t *testing.T) {
	r := job{np: 3, cas: "ulfm-anysource", flags: []string{"--enable-recovery"}, timeout: 60 * time.Second}.run(t)
	if r.code != 0 || !strings.Contains(r.stderr, "rank 2") {
		t.Fatalf("exit %d, want 0 with rank 2's loss reported\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestULFMOff(t *testing.T) {
	job{np: 2, cas: "ulfm-off"}.ok(t)
}
