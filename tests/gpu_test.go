package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

func init() {
	rankCases["gpu-p2p"] = caseGPUP2P
	rankCases["gpu-nopath"] = caseGPUNoPath
}

// caseGPUP2P: ranks 0 and 1 exchange device buffers of several sizes at
// once (IsendGPU/IrecvGPU both ways), then blocking, then a window of
// large messages both ways at once, then a truncated receive, and check
// every byte on the host. Each rank uses GPU rank % GPUs,
// or GPU 0 for both with GORUN_TEST_GPU_SAME=1.
func caseGPUP2P(w *mpi.Comm) error {
	me := w.Rank()
	peer := 1 - me
	dev, err := testDevice(me)
	if err != nil {
		return err
	}
	alloc := func(host []byte) (gpu.Buffer, error) {
		b, err := gpu.Alloc(dev, gpu.Uint8, len(host))
		if err == nil {
			err = b.CopyFromHost(host)
		}
		return b, err
	}
	for i, size := range []int{1, 8, 4097, 300<<10 + 5, 8<<20 + 1} {
		out := make([]byte, size)
		pattern(out, 10*i+me)
		sb, err := alloc(out)
		if err != nil {
			return err
		}
		rb, err := alloc(make([]byte, size))
		if err != nil {
			return err
		}
		rq, err := mpi.IrecvGPU(w, rb, peer, i)
		if err != nil {
			return err
		}
		sq, err := mpi.IsendGPU(w, sb, peer, i)
		if err != nil {
			return err
		}
		st, err := rq.Wait()
		if err != nil {
			return fmt.Errorf("size %d: receive: %w", size, err)
		}
		if _, err := sq.Wait(); err != nil {
			return fmt.Errorf("size %d: send: %w", size, err)
		}
		if st.Source != peer || st.Tag != i || st.Count() != size {
			return fmt.Errorf("size %d: status %+v, count %d", size, st, st.Count())
		}
		got, want := make([]byte, size), make([]byte, size)
		pattern(want, 10*i+peer)
		if err := rb.CopyToHost(got); err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("size %d: received wrong bytes", size)
		}
		// The same buffers, blocking, rank 0 first.
		if me == 0 {
			err = mpi.SendGPU(w, sb, peer, 100+i)
		} else {
			_, err = mpi.RecvGPU(w, rb, peer, 100+i)
		}
		if err != nil {
			return fmt.Errorf("size %d: blocking: %w", size, err)
		}
		if me == 1 {
			pattern(want, 10*i)
			if err := rb.CopyToHost(got); err != nil || !bytes.Equal(got, want) {
				return fmt.Errorf("size %d: blocking receive got wrong bytes (%v)", size, err)
			}
		}
		sb.Free()
		rb.Free()
	}
	if err := gpuP2PWindow(w, alloc); err != nil {
		return err
	}
	// Truncation: 1 MiB into 600 KiB.
	big := make([]byte, 1<<20)
	pattern(big, 77)
	if me == 0 {
		b, err := alloc(big)
		if err != nil {
			return err
		}
		defer b.Free()
		return mpi.SendGPU(w, b, 1, 200)
	}
	b, err := alloc(make([]byte, 600<<10))
	if err != nil {
		return err
	}
	defer b.Free()
	st, err := mpi.RecvGPU(w, b, 0, 200)
	if !errors.Is(err, mpi.ErrTruncate) || st.Count() != 600<<10 {
		return fmt.Errorf("truncated receive: %v, count %d", err, st.Count())
	}
	got := make([]byte, 600<<10)
	if err := b.CopyToHost(got); err != nil || !bytes.Equal(got, big[:600<<10]) {
		return fmt.Errorf("truncated receive kept wrong bytes (%v)", err)
	}
	return nil
}

// gpuP2PWindow has each rank post six receives and six sends of 300 KiB
// (and a byte) to its peer at once, each message its own pattern, and
// checks every byte: staged, the sends' chunks share the rank's bound on
// bytes in flight (GORUN_P2P_STAGE_INFLIGHT), so later messages wait for
// earlier ones' chunks.
func gpuP2PWindow(w *mpi.Comm, alloc func([]byte) (gpu.Buffer, error)) error {
	const k, size = 6, 300<<10 + 1
	me := w.Rank()
	peer := 1 - me
	var reqs []*mpi.Request
	var sbs, rbs []gpu.Buffer
	defer func() {
		for _, b := range append(sbs, rbs...) {
			b.Free()
		}
	}()
	for i := range k {
		out := make([]byte, size)
		pattern(out, 300+10*i+me)
		sb, err := alloc(out)
		if err != nil {
			return err
		}
		sbs = append(sbs, sb)
		rb, err := alloc(make([]byte, size))
		if err != nil {
			return err
		}
		rbs = append(rbs, rb)
		rq, err := mpi.IrecvGPU(w, rb, peer, 300+i)
		if err != nil {
			return err
		}
		reqs = append(reqs, rq)
	}
	for i, sb := range sbs {
		sq, err := mpi.IsendGPU(w, sb, peer, 300+i)
		if err != nil {
			return err
		}
		reqs = append(reqs, sq)
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return fmt.Errorf("window of %d messages of %d bytes: %w", k, size, err)
	}
	got, want := make([]byte, size), make([]byte, size)
	for i, rb := range rbs {
		pattern(want, 300+10*i+peer)
		if err := rb.CopyToHost(got); err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("window: message %d of %d bytes: received wrong bytes", i, size)
		}
	}
	return nil
}

// caseGPUNoPath: device memory to and from host memory. With a GPU and
// btl/cuda it goes through the staging pipeline and arrives intact;
// without (no GPU: a wrapped made-up pointer that nothing may touch; or
// GORUN_BTL excluding cuda) it fails with ErrBuffer on both sides,
// promptly, and the job goes on.
func caseGPUNoPath(w *mpi.Comm) error {
	me := w.Rank()
	f, err := btl.ParseFilter(os.Getenv("GORUN_BTL"))
	if err != nil {
		return err
	}
	staging := gpuUsable() && f.Allows("cuda")
	const n = 64 << 10
	var b gpu.Buffer
	if !gpuUsable() {
		b = gpu.Wrap(0, 0xdead0000, gpu.Uint8, n)
	} else {
		var aerr error
		if b, aerr = gpu.Alloc(0, gpu.Uint8, n); aerr != nil {
			return aerr
		}
		defer b.Free()
	}
	out := make([]byte, n)
	pattern(out, 5)
	if staging && me == 0 {
		if err := b.CopyFromHost(out); err != nil {
			return err
		}
	}
	host := make([]byte, n)
	var serr, rerr error
	if me == 0 {
		serr = mpi.SendGPU(w, b, 1, 1)                // device to a host receive
		_, rerr = mpi.RecvGPU(w, b.Slice(0, 8), 1, 2) // a host message into device memory
	} else {
		_, rerr = mpi.Recv(w, host, 0, 1)
		serr = mpi.Send(w, host[:8], 0, 2)
	}
	switch {
	case staging && (serr != nil || rerr != nil):
		return fmt.Errorf("rank %d: staged send %v, receive %v", me, serr, rerr)
	case staging && me == 1 && !bytes.Equal(host, out):
		return fmt.Errorf("rank 1: device-to-host message arrived wrong")
	case staging && me == 0:
		got := make([]byte, 8)
		if err := b.Slice(0, 8).CopyToHost(got); err != nil || !bytes.Equal(got, out[:8]) {
			return fmt.Errorf("rank 0: host-to-device message arrived wrong (%v)", err)
		}
	case !staging && me == 0 && (!errors.Is(serr, mpi.ErrBuffer) || !errors.Is(rerr, mpi.ErrBuffer)):
		return fmt.Errorf("rank 0: send %v, receive %v; want ErrBuffer for both", serr, rerr)
	case !staging && me == 1 && (serr != nil || !errors.Is(rerr, mpi.ErrBuffer)):
		return fmt.Errorf("rank 1: host send %v (want nil), receive of a device message %v (want ErrBuffer)", serr, rerr)
	}
	// The job goes on.
	x := []int{me}
	return mpi.Allreduce(w, x, x, mpi.Sum)
}

func gpuUsable() bool {
	_, err := gpu.DeviceCount()
	return err == nil
}

// testDevice is the GPU world rank me uses in the GPU cases: me modulo
// the GPUs there are, or GPU 0 for every rank with GORUN_TEST_GPU_SAME=1.
func testDevice(me int) (int, error) {
	n, err := gpu.DeviceCount()
	if err != nil {
		return 0, err
	}
	if os.Getenv("GORUN_TEST_GPU_SAME") == "1" {
		return 0, nil
	}
	return me % n, nil
}

// pushForcedAbsent refuses push kernels forced (GORUN_COLL_GPU_ALLREDUCE=
// push or twoshot) that device dev's loaded PTX lacks (an old
// GORUN_GPU_PTX): the ipc algorithms or the ring would run instead, and
// the case pass for the wrong reason.
func pushForcedAbsent(dev int) error {
	if f := os.Getenv("GORUN_COLL_GPU_ALLREDUCE"); (f == "push" || f == "twoshot") && !gpu.HasPushKernels(dev) {
		return fmt.Errorf("push kernels forced (%s), but device %d's kernels (GORUN_GPU_PTX=%q) have no current push kernels", f, dev, os.Getenv("GORUN_GPU_PTX"))
	}
	return nil
}

// TestGPUPointToPoint needs a GPU (the lent GPU hosts run it; see
// docs/gpu.md): device buffers between two ranks on two GPUs, then on one,
// by CUDA IPC and through the staging pipeline.
func TestGPUPointToPoint(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	t.Run("own-gpus", func(t *testing.T) { job{np: 2, cas: "gpu-p2p"}.ok(t) })
	t.Run("same-gpu", func(t *testing.T) { job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_TEST_GPU_SAME=1"}}.ok(t) })
	// Without CUDA IPC, device memory goes through pinned host memory in
	// chunks: over shared memory, and over TCP as between hosts.
	small := "GORUN_CUDA_STAGE_CHUNK=65536" // many chunks per message
	t.Run("staged-sm", func(t *testing.T) { job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_CUDA_IPC=none", small}}.ok(t) })
	t.Run("staged-tcp", func(t *testing.T) {
		job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", small}}.ok(t)
	})
	// A bound on a rank's staged bytes in flight of two chunks: the
	// window's later sends wait for the earlier ones' chunks.
	t.Run("staged-tcp-bound", func(t *testing.T) {
		job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", small, "GORUN_P2P_STAGE_INFLIGHT=131072"}}.ok(t)
	})
	t.Run("staged-tcp-same-gpu", func(t *testing.T) {
		job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", "GORUN_TEST_GPU_SAME=1"}}.ok(t)
	})
	// Over btl/ofi (issue 11), in a binary built with -tags ofi, on
	// libfabric's tcp provider: device memory takes the same staging
	// pipeline (no provider here offers FI_HMEM).
	t.Run("staged-ofi", func(t *testing.T) {
		if !slices.Contains(btl.Names(), "ofi") {
			t.Skip("built without the ofi transport (go test -tags ofi)")
		}
		job{np: 2, cas: "gpu-p2p", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=ofi,self,cuda", "GORUN_OFI_PROVIDER=tcp;ofi_rxm", small}}.ok(t)
	})
}

// TestGPUNoPath runs everywhere: device memory to and from host memory is
// staged where a GPU transport is open, and otherwise gives ErrBuffer,
// never a crash or a hang (without a GPU, or with cuda turned off).
func TestGPUNoPath(t *testing.T) {
	job{np: 2, cas: "gpu-nopath"}.ok(t)
	job{np: 2, cas: "gpu-nopath", env: []string{"GORUN_BTL=^cuda"}}.ok(t)
}

// TestGPUCommFreeRegions: communicators made, used by a GPU collective and
// freed in a loop give their IPC regions back (coll/gpuretire.go): once a
// rank's peers have unmapped its region of a freed communicator, the next
// region set-up frees it. Each rank's region at np=2 is 16 MiB; they used
// to stay allocated until the process ended (40 of them: 640 MiB a rank).
func TestGPUCommFreeRegions(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	t.Run("own-gpus", func(t *testing.T) { job{np: 2, cas: "gpu-comm-free"}.ok(t) })
	t.Run("np=3", func(t *testing.T) { job{np: 3, cas: "gpu-comm-free"}.ok(t) })
}

func init() { rankCases["gpu-comm-free"] = caseGPUCommFree }

func caseGPUCommFree(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	dev, err := testDevice(me)
	if err != nil {
		return err
	}
	ctx, err := gpu.DeviceContext(dev)
	if err != nil {
		return err
	}
	buf, err := gpu.Alloc(dev, gpu.Float32, 2048)
	if err != nil {
		return err
	}
	defer buf.Free()
	host := make([]float32, 2048)
	var free5 uint64
	const loops = 45
	for i := range loops {
		if i == 5 { // contexts, pools and the first regions are in place
			mpi.Barrier(w)
			if free5, _, err = ctx.MemInfo(); err != nil {
				return err
			}
		}
		d, err := w.Dup()
		if err != nil {
			return err
		}
		for j := range host {
			host[j] = float32(me + i)
		}
		if err := gpu.Upload(buf, host); err != nil {
			return err
		}
		if err := mpi.AllreduceGPU(d, buf, buf, mpi.Sum); err != nil {
			return fmt.Errorf("loop %d: %w", i, err)
		}
		if err := gpu.Download(host, buf); err != nil {
			return err
		}
		if want := float32(n*(n-1)/2 + n*i); host[0] != want || host[2047] != want {
			return fmt.Errorf("loop %d: %v, want %v", i, host[0], want)
		}
		if err := d.Free(); err != nil {
			return err
		}
	}
	mpi.Barrier(w)
	if d, err := w.Dup(); err == nil {
		d.Free() // takes in the last notices
	}
	free, _, err := ctx.MemInfo()
	if err != nil {
		return err
	}
	// Ranks sharing a device see each other's regions: allow a few of
	// each rank's.
	if used := int64(free5) - int64(free); used > 8*16<<20*int64(n) {
		return fmt.Errorf("device %d: %d MiB less free after %d communicators made, used and freed than after the first 5", dev, used>>20, loops-5)
	}
	return nil
}
