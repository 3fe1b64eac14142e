package tests

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/mpi"
)

func init() {
	rankCases["gpu-eager"] = caseGPUEager
	rankCases["gpu-eager-fail"] = caseGPUEagerFail
}

// eagerSizes straddle the eager limits of sm (16 KiB) and tcp (64 KiB),
// so that each job sends some of them eagerly (staged at once, issue 10)
// and the rest by the staging rendezvous.
var eagerSizes = []int{0, 1, 2, 7, 255, 4096, 16<<10 - 1, 16 << 10, 16<<10 + 1, 64<<10 - 1, 64 << 10, 64<<10 + 1}

// guard is how many bytes past a message each receive buffer has: they
// must keep their poison.
const guard = 64

// caseGPUEager: rank 0 sends device memory of each of eagerSizes to rank
// 1, which receives it posted and unexpected, into device and host
// memory, then probed, and checks every byte and the bytes past it; then
// device and host messages of one tag alternate and must arrive in order.
func caseGPUEager(w *mpi.Comm) error {
	me := w.Rank()
	dev, err := testDevice(me)
	if err != nil {
		return err
	}
	var bufs []gpu.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	devBuf := func(host []byte) (gpu.Buffer, error) {
		b, err := gpu.Alloc(dev, gpu.Uint8, max(len(host), 1))
		if err == nil {
			bufs = append(bufs, b)
			err = b.CopyFromHost(host)
		}
		return b.Slice(0, len(host)), err
	}
	poison := func(size int) []byte { return bytes.Repeat([]byte{0xa5}, size+guard) }
	// check compares a receive buffer (host, or copied from the device)
	// with the message seed made and the poison past it.
	check := func(what string, size, seed int, st mpi.Status, got []byte) error {
		want := poison(size)
		pattern(want[:size], seed)
		if st.Source != 0 || st.Count() != size {
			return fmt.Errorf("%s, %d bytes: status %+v, count %d", what, size, st, st.Count())
		}
		return mismatch(fmt.Sprintf("%s, %d bytes", what, size), got, want)
	}
	fromDev := func(b gpu.Buffer) ([]byte, error) {
		h := make([]byte, b.Len())
		return h, b.CopyToHost(h)
	}
	const (
		posted = iota
		unexpected
		probed
	)
	for i, size := range eagerSizes {
		for mode := range 3 {
			for _, toDev := range []bool{true, false} {
				tag := 1000*i + 10*mode
				if toDev {
					tag++
				}
				seed := 7*tag + 3
				what := fmt.Sprintf("%s receive into %s memory", [...]string{"posted", "unexpected", "probed"}[mode], map[bool]string{true: "device", false: "host"}[toDev])
				if me == 0 {
					out := make([]byte, size)
					pattern(out, seed)
					sb, err := devBuf(out)
					if err != nil {
						return err
					}
					if mode == posted {
						if err := mpi.Barrier(w); err != nil { // rank 1 has posted
							return err
						}
					}
					q, err := mpi.IsendGPU(w, sb, 1, tag)
					if err != nil {
						return fmt.Errorf("%s, %d bytes: send: %w", what, size, err)
					}
					if mode != posted {
						if err := mpi.Barrier(w); err != nil { // the message is (or its RTS is) there first
							return err
						}
					}
					if _, err := q.Wait(); err != nil {
						return fmt.Errorf("%s, %d bytes: send: %w", what, size, err)
					}
					continue
				}
				init := poison(size)
				var rb gpu.Buffer
				var host []byte
				if toDev {
					if rb, err = devBuf(init); err != nil {
						return err
					}
				} else {
					host = init
				}
				recv := func() (*mpi.Request, error) {
					if toDev {
						return mpi.IrecvGPU(w, rb, 0, tag)
					}
					return mpi.Irecv(w, host, 0, tag)
				}
				var q *mpi.Request
				switch mode {
				case posted:
					if q, err = recv(); err == nil {
						err = mpi.Barrier(w)
					}
				case unexpected:
					if err = mpi.Barrier(w); err == nil {
						q, err = recv()
					}
				case probed:
					var st mpi.Status
					if err = mpi.Barrier(w); err == nil {
						st, err = mpi.Probe(w, 0, tag)
					}
					if err == nil && (st.Count() != size || st.Tag != tag) {
						err = fmt.Errorf("probe: status %+v, count %d", st, st.Count())
					}
					if err == nil {
						q, err = recv()
					}
				}
				if err != nil {
					return fmt.Errorf("%s, %d bytes: %w", what, size, err)
				}
				st, err := q.Wait()
				if err != nil {
					return fmt.Errorf("%s, %d bytes: %w", what, size, err)
				}
				got := host
				if toDev {
					if got, err = fromDev(rb); err != nil {
						return err
					}
				}
				if err := check(what, size, seed, st, got); err != nil {
					return err
				}
			}
		}
	}
	// Order: device and host messages of one tag, alternating, all sent
	// before rank 1 posts the first half (unexpected) and after it posts
	// the second half; each must land in its own receive, in send order.
	const k = 8
	for _, size := range []int{1, 100, 16<<10 - 1, 16<<10 + 1} {
		if me == 0 {
			var qs []*mpi.Request
			for j := range k {
				out := make([]byte, size)
				pattern(out, 31*j+size)
				var q *mpi.Request
				if j%2 == 0 {
					sb, err := devBuf(out)
					if err != nil {
						return err
					}
					q, err = mpi.IsendGPU(w, sb, 1, 5)
				} else {
					q, err = mpi.Isend(w, out, 1, 5)
				}
				if err != nil {
					return err
				}
				qs = append(qs, q)
				if j == k/2-1 {
					if err := mpi.Barrier(w); err != nil {
						return err
					}
				}
			}
			if _, err := mpi.Waitall(qs); err != nil {
				return fmt.Errorf("order, %d bytes: send: %w", size, err)
			}
			if err := mpi.Barrier(w); err != nil {
				return err
			}
			continue
		}
		var qs []*mpi.Request
		var hosts [k][]byte
		var devs [k]gpu.Buffer
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		for j := range k {
			var q *mpi.Request
			if (j/2)%2 == 0 { // receive buffers alternate in pairs: device, device, host, host, ...
				if devs[j], err = devBuf(poison(size)); err == nil {
					q, err = mpi.IrecvGPU(w, devs[j], 0, 5)
				}
			} else {
				hosts[j] = poison(size)
				q, err = mpi.Irecv(w, hosts[j], 0, 5)
			}
			if err != nil {
				return err
			}
			qs = append(qs, q)
		}
		sts, err := mpi.Waitall(qs)
		if err != nil {
			return fmt.Errorf("order, %d bytes: %w", size, err)
		}
		for j := range k {
			got := hosts[j]
			if got == nil {
				if got, err = fromDev(devs[j]); err != nil {
					return err
				}
			}
			if err := check(fmt.Sprintf("order, message %d", j), size, 31*j+size, sts[j], got); err != nil {
				return err
			}
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
	}
	return nil
}

// caseGPUEagerFail: rank 0 sends from a device address that is no
// allocation, which the copy to host memory refuses: its send fails, and
// so does rank 1's receive, promptly (no hang); the job goes on.
func caseGPUEagerFail(w *mpi.Comm) error {
	me := w.Rank()
	const size = 16
	if me == 0 {
		for j := range 2 { // one unexpected there, one that may be posted
			q, err := mpi.IsendGPU(w, gpu.Wrap(0, 0xdead0000, gpu.Uint8, size), 1, 9)
			if err == nil {
				_, err = q.Wait()
			}
			if err == nil {
				return fmt.Errorf("send %d from a device address that is no allocation succeeded", j)
			}
			fmt.Fprintf(os.Stderr, "rank 0: send %d failed as it should: %v\n", j, err)
		}
	} else {
		host := make([]byte, size)
		for j := range 2 {
			q, err := mpi.Irecv(w, host, 0, 9)
			if err != nil {
				return err
			}
			if _, err = q.Wait(); err == nil {
				return fmt.Errorf("receive %d of a message whose device memory could not be copied succeeded", j)
			}
			fmt.Fprintf(os.Stderr, "rank 1: receive %d failed as it should: %v\n", j, err)
		}
	}
	// A window of three eager sends whose copies are issued together
	// (GORUN_CUDA_STAGE_BATCH): the middle one's address is no allocation.
	// Only it fails, at both ends; the others arrive whole.
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	var qs [3]*mpi.Request
	var bufs [3][]byte
	var errs [3]error
	if me == 0 {
		good, srcs, err := badWindow(me, size)
		if err != nil {
			return err
		}
		defer good.Free()
		out := make([]byte, 2*size)
		pattern(out, 77)
		if err := good.CopyFromHost(out); err != nil {
			return err
		}
		for j := range qs {
			if qs[j], err = mpi.IsendGPU(w, srcs[j], 1, 10+j); err != nil {
				return err
			}
		}
	} else {
		for j := range qs {
			bufs[j] = make([]byte, size)
			var err error
			if qs[j], err = mpi.Irecv(w, bufs[j], 0, 10+j); err != nil {
				return err
			}
		}
	}
	for j, q := range qs {
		_, errs[j] = q.Wait()
	}
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		return fmt.Errorf("window of three eager device sends, the middle one from no allocation: rank %d's errors %v, want only the middle one", me, errs)
	}
	if me == 1 {
		want := make([]byte, 2*size)
		pattern(want, 77)
		if err := mismatch("window, first message", bufs[0], want[:size]); err != nil {
			return err
		}
		if err := mismatch("window, third message", bufs[2], want[size:]); err != nil {
			return err
		}
	}
	// The same at the receiver: three eager host messages into device
	// buffers whose middle one is no allocation, the receives posted
	// first, so that the messages land in pinned memory and their copies
	// to the device go together (the first at once, the others listed
	// while it runs, when they arrive in one poll). Only the middle
	// receive fails.
	if me == 1 {
		good, dsts, err := badWindow(me, size)
		if err != nil {
			return err
		}
		defer good.Free()
		for j := range qs {
			if qs[j], err = mpi.IrecvGPU(w, dsts[j], 0, 20+j); err != nil {
				return err
			}
		}
		if err := mpi.Barrier(w); err != nil { // the receives are posted
			return err
		}
		for j, q := range qs {
			_, errs[j] = q.Wait()
		}
		if errs[0] != nil || errs[2] != nil || errs[1] == nil {
			return fmt.Errorf("window of three eager receives into device memory, the middle one no allocation: errors %v, want only the middle one", errs)
		}
		got := make([]byte, 2*size)
		if err := good.CopyToHost(got); err != nil {
			return err
		}
		for j, off := range []int{0, size} {
			want := make([]byte, size)
			pattern(want, 90+2*j)
			if err := mismatch(fmt.Sprintf("receive window, message %d", 2*j), got[off:off+size], want); err != nil {
				return err
			}
		}
	} else {
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		for j := range qs {
			out := make([]byte, size)
			pattern(out, 90+j)
			var err error
			if qs[j], err = mpi.Isend(w, out, 1, 20+j); err != nil {
				return err
			}
		}
		for j, q := range qs {
			if _, err := q.Wait(); err != nil {
				return fmt.Errorf("host send %d of the receive window: %w", j, err)
			}
		}
	}
	x := []int{me}
	return mpi.Allreduce(w, x, x, mpi.Sum)
}

// badWindow allocates 2*size bytes on rank me's test device (good) and
// returns three buffers of size bytes: its halves, and between them one
// whose address is no allocation on that device (one stream, one batch).
func badWindow(me, size int) (good gpu.Buffer, win [3]gpu.Buffer, err error) {
	dev, err := testDevice(me)
	if err == nil {
		good, err = gpu.Alloc(dev, gpu.Uint8, 2*size)
	}
	if err != nil {
		return good, win, err
	}
	return good, [3]gpu.Buffer{good.Slice(0, size), gpu.Wrap(dev, 0xdead0000, gpu.Uint8, size), good.Slice(size, 2*size)}, nil
}

// TestGPUEagerStaged needs a GPU: small device messages (issue 10) staged
// without CUDA IPC, over shared memory and over TCP, on two GPUs and on
// one, and a send whose device memory cannot be copied.
func TestGPUEagerStaged(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	if !cuda.BatchCopies() {
		t.Log("the driver has no cuMemcpyBatchAsync_v2 (CUDA 13): the batched subtests issue their copies one by one")
	}
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"staged-sm", []string{"GORUN_CUDA_IPC=none"}},
		{"staged-tcp", []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda"}},
		// each eager copy issued at once with an event of its own
		{"staged-tcp-unbatched", []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", "GORUN_CUDA_STAGE_BATCH=1"}},
		{"staged-tcp-same-gpu", []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", "GORUN_TEST_GPU_SAME=1"}},
		{"ipc", nil}, // small device messages by CUDA IPC: unchanged
	} {
		t.Run(c.name, func(t *testing.T) { job{np: 2, cas: "gpu-eager", env: c.env}.ok(t) })
	}
	for _, batch := range []string{"64", "1"} {
		t.Run("copy-fails-batch"+batch, func(t *testing.T) {
			job{np: 2, cas: "gpu-eager-fail", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda", "GORUN_CUDA_STAGE_BATCH=" + batch}}.ok(t)
		})
	}
}
