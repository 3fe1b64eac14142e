package coll

import (
	"fmt"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
)

// The "push" GPU algorithms: each ipc algorithm of gpuipc.go in one
// kernel of package gpu's, on the same regions. After the host barrier
// that says every rank has finished its earlier calls, each rank's kernel
// stores its data straight into the peers' slots, raises a flag per block
// in each peer's region (after a system-wide fence) and waits, on the
// device, for the flags it needs in its own; then it folds or copies out
// what came. One launch and one synchronization per call, where the ipc
// algorithms pay copies, a synchronization, a second host barrier, the
// reduce launches and a second synchronization. Where a rank cannot run
// the kernels, every rank runs the algorithm the push one stands for (the
// ipc one; Reduce's p2p one-shot) instead: ipcSetup's second vote.

// pushTimeout bounds the push kernel's wait for a peer's flags. The ranks
// meet at a host barrier just before they queue the kernel, so a live
// peer's flags come within microseconds; a peer that failed between the
// barrier and its launch must not hold the GPU forever.
const pushTimeout = 10 * time.Second

// gpuAllreducePush: the one-shot allreduce of gpuAllreduceIPC in one
// kernel (gpu.AllreducePush): after the host barrier that says every rank
// has finished its earlier calls, each rank's kernel pushes its input into
// its slot of every peer's region, raises a flag in each peer's region,
// waits for every peer's flag in its own and folds the contributions there
// in rank order. One launch and one synchronization, where gpuAllreduceIPC
// pays a copy, a synchronization, a second host barrier, n-1 reduce
// launches and a second synchronization. Where a rank cannot run the
// kernel, every rank runs gpuAllreduceIPC (the set-up's second vote).
func gpuAllreducePush(c *Comm, a *Args, d *devCall) error {
	return d.push(c, a, "allreduce", d.rcv.Len(), gpuAllreduceIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.AllreducePush(s, d.op, st.reg, uint64(c.seq), typed(d.own, d.dt, 0, d.own.Len()), typed(d.rcv, d.dt, 0, d.rcv.Len()))
	})
}

// gpuReduceScatterPush is gpuReduceScatterIPC in one kernel
// (gpu.ReduceScatterPush), as gpuAllreducePush is gpuAllreduceIPC: block r
// of every input goes to rank r's region alone.
func gpuReduceScatterPush(c *Comm, a *Args, d *devCall) error {
	m := a.Counts[c.Rank()]
	return d.push(c, a, "reduce-scatter", m, gpuReduceScatterIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.ReduceScatterPush(s, d.op, st.reg, uint64(c.seq), typed(d.own, d.dt, 0, c.Size()*m), typed(d.rcv, d.dt, 0, m))
	})
}

// gpuAllgatherPush is gpuAllgatherIPC in one kernel (gpu.AllgatherPush):
// the pushed blocks are copied into place by the kernel that pushed this
// rank's, once the peers' flags have come.
func gpuAllgatherPush(c *Comm, a *Args, d *devCall) error {
	me, m := c.Rank(), a.Counts[c.Rank()]
	return d.push(c, a, "allgather", m, gpuAllgatherIPC, func(s *cuda.Stream, st *ipcState) error {
		in := d.own
		if d.in {
			in = bytesOf(d.rcv, me*m, m)
		}
		return gpu.AllgatherPush(s, st.reg, uint64(c.seq), bytesOf(in, 0, m), bytesOf(d.rcv, 0, c.Size()*m))
	})
}

// gpuReducePush is the one-shot reduce in one kernel (gpu.ReducePush):
// every other rank's kernel pushes its input into its slot of the root's
// region alone, raises its flags there and is done; the root's waits for
// every peer's flags and folds the contributions in rank order, as
// gpuAllreducePush's does at every rank. Where the regions do not serve,
// the p2p one-shot (there is no copy-engine ipc reduce).
func gpuReducePush(c *Comm, a *Args, d *devCall) error {
	size := d.own.Len()
	return d.push(c, a, "reduce", size, gpuReduceOneshot, func(s *cuda.Stream, st *ipcState) error {
		var out gpu.Buffer // a non-root's result goes nowhere
		if c.Rank() == a.Root {
			out = typed(d.rcv, d.dt, 0, size)
		}
		return gpu.ReducePush(s, d.op, st.reg, uint64(c.seq), a.Root, typed(d.own, d.dt, 0, size), out)
	})
}

// gpuBcastPush is gpuBcastIPC in one kernel (gpu.BcastPush): the root's
// kernel pushes the buffer into its slot of every peer's region, raises
// its flags there and is done; each peer's kernel waits for the root's
// flags and copies the slot out, block by block as each block's flag
// comes.
func gpuBcastPush(c *Comm, a *Args, d *devCall) error {
	return d.push(c, a, "bcast", d.rcv.Len(), gpuBcastIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.BcastPush(s, st.reg, uint64(c.seq), a.Root, bytesOf(d.rcv, 0, d.rcv.Len()))
	})
}

// push runs one push kernel (launch) for a call of size bytes per slot:
// every rank runs fallback instead where the regions or the kernels do not
// serve. After the host barrier (every rank has finished its earlier
// calls, so nothing still reads the slots this call writes), the kernel is
// queued on the stream of the regions' device and waited for; a peer that
// failed shows as the kernel's error word.
func (d *devCall) push(c *Comm, a *Args, what string, size int, fallback func(*Comm, *Args, *devCall) error, launch func(*cuda.Stream, *ipcState) error) error {
	st, err := c.ipcRegions(d, size)
	if err != nil {
		return err
	}
	if st == nil || !st.push {
		return fallback(c, a, d)
	}
	s := d.s
	if st.dev != d.dev {
		// This call's buffers are on another device than the region (the
		// rank switched devices after the communicator's first GPU call):
		// the kernel runs on the region's device, which addresses the
		// peers' regions, and reaches the buffers by peer access.
		if err := gpu.EnablePeerAccess(st.dev, d.dev); err != nil {
			return fmt.Errorf("GPU %s: device %d reaching device %d: %w", what, st.dev, d.dev, err)
		}
		if s, err = devStream(st.dev); err != nil {
			return err
		}
	}
	if err := barrierFlat(c); err != nil {
		return err
	}
	if err := launch(s, st); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return fmt.Errorf("GPU %s: %w", what, err)
	}
	if w := st.errWord.Bytes(); w[0] != 0 {
		clear(w)
		return fmt.Errorf("GPU %s: a peer's data did not come within %v (the peer failed)", what, pushTimeout)
	}
	return nil
}
