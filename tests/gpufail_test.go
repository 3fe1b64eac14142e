package tests

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

// A rank that dies in the middle of a GPU collective (issue 10): under
// gorun --enable-recovery the survivors' calls fail with ErrProcFailed
// instead of waiting forever in their kernels, and the survivors go on
// with GPU collectives on the shrunk communicator, on the same devices.

func init() { rankCases["gpu-die"] = caseGPUDie }

const (
	gpuDieVictim = 2
	gpuDieAt     = 20
	gpuDieIters  = 60
	gpuDieCount  = 48<<10 + 5 // float32s: 192 KiB and 20 bytes, within the push kernels' slots; twoshot's three launches at 3 and 2 ranks
)

// caseGPUDie: an AllreduceGPU loop in which world rank 2 enters iteration
// 20 and kills itself (SIGKILL) 5 ms later, while its own kernel runs
// (waiting for the others' data: they come 30 ms late to that iteration).
// So the survivors' kernels push into the region of a process that is
// gone, and (at iteration 20 or, when the victim's data had come, 21)
// wait for data that never comes. They must see the failure
// (ErrProcFailed, or ErrRevoked once a survivor revoked), revoke, shrink,
// and finish the loop on the shrunk communicator with exact results,
// their CUDA contexts intact. (On 2 H100 the push kernels' first run
// found iteration 20 complete, with the victim's contribution, and
// failed at 21.)
func caseGPUDie(w *mpi.Comm) error {
	me := w.Rank()
	g, err := newGPUColl(w)
	if err != nil {
		return err
	}
	free, err := g.buffers(gpu.Float32, gpuDieCount)
	if err != nil {
		return err
	}
	defer free()
	fill := func(v float64) []float64 { return slices.Repeat([]float64{v}, gpuDieCount) }
	c := w
	members := []int{0, 1, 2} // world ranks of c
	var sawFault time.Time
	var recovery time.Duration // from the failure seen to the first call done on the survivors
	for i := 0; i < gpuDieIters; {
		if _, err := g.upload(g.send, gpu.Float32, fill(float64(me+1))); err != nil {
			return fmt.Errorf("iteration %d: upload: %w", i, err)
		}
		if i == gpuDieAt && c == w {
			if me == gpuDieVictim {
				time.AfterFunc(5*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
			} else {
				time.Sleep(30 * time.Millisecond)
			}
		}
		err := mpi.AllreduceGPU(c, g.send, g.recv, mpi.Sum)
		if err == nil {
			want := 0.0
			for _, r := range members {
				want += float64(r + 1)
			}
			if err := g.expect(fmt.Sprintf("iteration %d on %d ranks", i, len(members)), g.recv, gpu.Float32, fill(want)); err != nil {
				return err
			}
			if len(g.failures) > 0 {
				return fmt.Errorf("rank %d: %s", me, g.failures[0])
			}
			if c != w && recovery == 0 {
				recovery = time.Since(sawFault)
			}
			i++
			continue
		}
		if me == gpuDieVictim {
			return fmt.Errorf("the victim's call returned before it died: %w", err)
		}
		if !errors.Is(err, mpi.ErrProcFailed) && !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("iteration %d: %w (want ErrProcFailed or ErrRevoked)", i, err)
		}
		if c != w {
			return fmt.Errorf("iteration %d: the shrunk communicator failed too: %w", i, err)
		}
		// The victim's kernel may have pushed its data for iteration
		// gpuDieAt before it died (it need not wait for the others to
		// push its own): then that call succeeds and a later one fails
		// (the next, unless the kill comes late on a loaded host).
		if i < gpuDieAt {
			return fmt.Errorf("iteration %d failed (the victim dies at %d): %w", i, gpuDieAt, err)
		}
		sawFault = time.Now()
		if err := c.Revoke(); err != nil {
			return fmt.Errorf("revoke: %w", err)
		}
		nc, err := c.Shrink()
		if err != nil {
			return fmt.Errorf("shrink: %w", err)
		}
		if nc.Size() != 2 {
			return fmt.Errorf("shrunk communicator has %d members, want 2", nc.Size())
		}
		c, members = nc, []int{0, 1}
		// Go on from the lowest iteration every survivor completed.
		done := []int64{int64(i)}
		if err := mpi.Allreduce(c, done, done, mpi.Min); err != nil {
			return fmt.Errorf("agree on the restart point: %w", err)
		}
		i = int(done[0])
	}
	if c == w {
		return fmt.Errorf("rank %d died, and no call failed", gpuDieVictim)
	}
	if me == 0 {
		fmt.Printf("gpu-die: survivors finished %d iterations, recovered in %v\n", gpuDieIters, recovery.Round(time.Millisecond))
	}
	return nil
}

// TestGPUPushPeerDies needs a GPU (the lent GPU hosts run it): three
// ranks on the GPUs there are, the push kernels (the tables' choice at
// this size), the two-shot allreduce (three push launches a call at this
// count) and the copy-engine ipc algorithm forced in turn.
func TestGPUPushPeerDies(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	push := []string{"GORUN_COLL_GPU_ALLREDUCE=push"}
	for _, env := range [][]string{push, {"GORUN_COLL_GPU_ALLREDUCE=twoshot"}, {"GORUN_COLL_GPU_ALLREDUCE=ipc"}} {
		t.Run(strings.TrimPrefix(env[0], "GORUN_COLL_GPU_ALLREDUCE="), func(t *testing.T) {
			r := job{np: 3, cas: "gpu-die", env: env, flags: []string{"--enable-recovery"}, timeout: 90 * time.Second}.run(t)
			if r.code != 0 || !strings.Contains(r.stdout, "gpu-die: survivors finished") {
				t.Fatalf("exit %d, want 0 with the survivors finished\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			t.Logf("%s(%v)", r.stdout, r.elapsed.Round(time.Millisecond))
			checkNothingLeft(t, r)
		})
	}
}

func init() { rawCases["gpu-finalize-after-mismatch"] = caseGPUFinalizeAfterMismatch }

// caseGPUFinalizeAfterMismatch: every rank makes one AllreduceGPU (the
// push kernels' set-up), then rank 0 alone calls a host Allreduce and an
// AllreduceGPU, while the others call Finalize. Each lone call must fail,
// naming a rank that called Finalize (the push kernels' wait asks the
// others about a stalled call, as the host collectives' waits do), and
// every Finalize then succeed. (Finalize's barrier ran on the world's
// collective context: it matched the lone host Allreduce, the others
// finalized and exited, and the push kernels' wait, which asked the
// transports only about ranks reported failed, waited for ever.)
func caseGPUFinalizeAfterMismatch() int {
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "Init: %v\n", err)
		return 1
	}
	w := mpi.World()
	me := w.Rank()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", me, err)
		mpi.Finalize()
		return 1
	}
	g, err := newGPUColl(w)
	if err != nil {
		return fail(err)
	}
	free, err := g.buffers(gpu.Float32, 1024)
	if err != nil {
		return fail(err)
	}
	defer free()
	if err := mpi.AllreduceGPU(w, g.send, g.recv, mpi.Sum); err != nil {
		return fail(fmt.Errorf("the first AllreduceGPU: %w", err))
	}
	if me == 0 {
		x := []int64{1}
		err := mpi.Allreduce(w, x, x, mpi.Sum)
		fmt.Fprintf(os.Stderr, "rank 0: lone Allreduce: %v\n", err)
		err = mpi.AllreduceGPU(w, g.send, g.recv, mpi.Sum)
		fmt.Fprintf(os.Stderr, "rank 0: lone AllreduceGPU: %v\n", err)
	}
	err = mpi.Finalize()
	fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", me, err)
	return 0
}

// TestGPUFinalizeAfterMismatch needs a GPU (the lent GPU hosts run it):
// the push kernels' wait, as TestFinalizeAfterMismatch the host
// collectives' ones, fails a call that the others answered with Finalize
// instead of waiting for ever.
func TestGPUFinalizeAfterMismatch(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	r := job{np: 3, cas: "gpu-finalize-after-mismatch", env: []string{"GORUN_COLL_GPU_ALLREDUCE=push"}, timeout: 90 * time.Second}.ok(t)
	for _, call := range []string{"rank 0: lone Allreduce:", "rank 0: lone AllreduceGPU:"} {
		if l := lastLine(r.stderr, call); !strings.Contains(l, "called Finalize instead of this call") {
			t.Errorf("%q should fail naming a rank that called Finalize\nstderr:\n%s", l, r.stderr)
		}
	}
	for rank := range 3 {
		if l := lastLine(r.stderr, fmt.Sprintf("rank %d: Finalize:", rank)); !strings.HasSuffix(l, "Finalize: <nil>") {
			t.Errorf("rank %d: %q\nstderr:\n%s", rank, l, r.stderr)
		}
	}
}
