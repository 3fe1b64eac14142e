package coll

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/p2p"
)

// The "push" GPU algorithms: each ipc algorithm of gpuipc.go in one
// kernel of package gpu's, on the same regions. Each rank's kernel stores
// its data straight into the peers' slots, raises a data word per block in
// each peer's region (after a system-wide fence) and waits, on the device,
// for the data words it needs in its own; then it folds or copies out what
// came. One launch per call (two or three for the two-shot allreduce, one
// kernel after the other), each waited for by polling a completion word
// the kernel writes in host memory (gpu.PushWords.Wait), where the ipc
// algorithms pay two host barriers, copies, a synchronization, the reduce
// launches and a second synchronization. Where a rank cannot run the
// kernels, every rank runs the algorithm the push one stands for (the ipc
// one; Reduce's p2p one-shot) instead: ipcSetup's second vote.
//
// No host barrier precedes a call (one took 0-3 µs of a 16-20 µs call at
// np 2, MEASUREMENTS.md, GPU collectives): the words carry the call's
// number instead of being reset, every rank's kernel acknowledges its call
// in every peer's region as it begins, and a rank writes its pushes into
// the two sets of slots in turn, so that it writes a set again only once
// every peer it writes to has acknowledged a call after the one that last
// wrote it, that is, has finished reading that call's data (gpu.PushCall,
// kernels/reduce.cu). A launch's number is four times its call's
// sequence number on the communicator (64 bits), plus the launch's index
// in its call (pushNum), which every rank gives the same launch even when
// the call failed before its algorithm ran on some rank: a call that was
// aborted half-way leaves nothing a later call mistakes for its own. The
// ipc algorithms' own barriers order them against the push calls before
// them; a push call after them waits, in the kernel, for the
// acknowledgement of a call after theirs (ipcState.wrote).

// pushSlice bounds one launch's wait for a peer (its acknowledgement or its
// data). A live peer may come late by any amount (MPI lets a rank arrive
// at a collective whenever it likes), so a launch that waited this long
// returns, the host checks what a host wait would check (the call aborted
// by a notice, a failed peer, a revoked communicator, the stall query) and
// launches the same call again, which resumes where it stopped. 5 ms:
// a relaunch costs one launch and one synchronization (a whole call is
// 15-30 µs), well under 1% of the wait, and a failed peer or an abort is
// seen within a few milliseconds (not measured apart from the tests'
// late rank, 30 ms).
const pushSlice = 5 * time.Millisecond

// gpuAllreducePush: the one-shot allreduce of gpuAllreduceIPC in one
// kernel (gpu.AllreducePush): once the peers have acknowledged a call
// after the one that last wrote the set it writes, each rank's kernel
// pushes its input into its slot of every peer's region, raises a flag in
// each peer's region, waits for every peer's flag in its own and folds the
// contributions there in rank order. One launch, waited for by polling,
// where gpuAllreduceIPC pays a copy, a synchronization, a second host
// barrier, n-1 reduce launches and a second synchronization. Where a rank cannot run the
// kernel, every rank runs gpuAllreduceIPC (the set-up's second vote).
func gpuAllreducePush(c *Comm, a *Args, d *devCall) error {
	return d.push(c, a, "allreduce", d.rcv.Len(), gpuAllreduceIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.AllreducePush(s, d.op, st.reg, st.pc, typed(d.own, d.dt, 0, d.own.Len()), typed(d.rcv, d.dt, 0, d.rcv.Len()))
	})
}

// gpuAllreduceTwoshot: the allreduce as push launches on the regions,
// one after the other: the reduce-scatter kernel (rank r folds block r of
// every rank's vector, in rank order, into block r of its receive buffer),
// then the allgather kernel (each rank's folded block to every peer), on
// the first n blocks of m bytes (the size over n, rounded down to 16
// bytes); then, where they leave some, the one-shot push kernel on the
// rest (under 16n bytes). Each rank moves 2(n-1)/n of the vector where
// the one-shot push moves n-1 times it, and every rank holds the same
// bits (each element folded once, in rank order, and copied). Where a
// block would exceed a slot, the vector is under 16n bytes, or the
// regions do not serve (a nonblocking call, a view of part of the
// communicator, ranks on other hosts), twoshotElse: every rank sees the
// same count and communicator, so all take the same path.
func gpuAllreduceTwoshot(c *Comm, a *Args, d *devCall) error {
	n, size, es := c.Size(), d.rcv.Len(), d.dt.Size()
	// A block's bytes: a multiple of 16 where the element size divides
	// it (all of package gpu's types), so that the kernels take 16 bytes
	// at a time (at np 3, 8 MiB in blocks of 2796200 bytes took 105 µs,
	// element by element).
	g := es
	if 16%es == 0 {
		g = 16
	}
	m := size / n / g * g
	if m == 0 {
		// Counted as d.push counts a fall-back, so that a report shows
		// a forced twoshot that did not run.
		countPush("allreduce (reduce-scatter)", true)
		return twoshotElse(c, a, d)
	}
	me, body := c.Rank(), n*m
	served := false
	err := d.push(c, a, "allreduce (reduce-scatter)", m, twoshotElse, func(s *cuda.Stream, st *ipcState) error {
		served = true
		return gpu.ReduceScatterPush(s, d.op, st.reg, st.pc, typed(d.own, d.dt, 0, body), typed(d.rcv, d.dt, me*m, m))
	})
	if err != nil || !served {
		return err
	}
	defer func() { d.phase = 0 }()
	lost := func(*Comm, *Args, *devCall) error {
		// The regions served the first launch of this call a moment ago.
		return errors.New("GPU allreduce: the IPC regions served the reduce-scatter but not a later launch")
	}
	d.phase = 1
	if err := d.push(c, a, "allreduce (allgather)", m, lost, func(s *cuda.Stream, st *ipcState) error {
		return gpu.AllgatherPush(s, st.reg, st.pc, bytesOf(d.rcv, me*m, m), bytesOf(d.rcv, 0, body))
	}); err != nil || body == size {
		return err
	}
	d.phase = 2
	return d.push(c, a, "allreduce (the last elements)", size-body, lost, func(s *cuda.Stream, st *ipcState) error {
		return gpu.AllreducePush(s, d.op, st.reg, st.pc, typed(d.own, d.dt, body, size-body), typed(d.rcv, d.dt, body, size-body))
	})
}

// twoshotElse is the table's choice where the two-shot does not apply:
// the one-shot push up to a slot (with its own fall-backs), else the ring.
func twoshotElse(c *Comm, a *Args, d *devCall) error {
	if d.rcv.Len() <= ipcSlot(c.Size()) {
		return gpuAllreducePush(c, a, d)
	}
	return gpuAllreduceRing(c, a, d)
}

// gpuReduceScatterPush is gpuReduceScatterIPC in one kernel
// (gpu.ReduceScatterPush), as gpuAllreducePush is gpuAllreduceIPC: block r
// of every input goes to rank r's region alone.
func gpuReduceScatterPush(c *Comm, a *Args, d *devCall) error {
	m := a.Counts[c.Rank()]
	return d.push(c, a, "reduce-scatter", m, gpuReduceScatterIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.ReduceScatterPush(s, d.op, st.reg, st.pc, typed(d.own, d.dt, 0, c.Size()*m), typed(d.rcv, d.dt, 0, m))
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
		return gpu.AllgatherPush(s, st.reg, st.pc, bytesOf(in, 0, m), bytesOf(d.rcv, 0, c.Size()*m))
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
		return gpu.ReducePush(s, d.op, st.reg, st.pc, a.Root, typed(d.own, d.dt, 0, size), out)
	})
}

// gpuBcastPush is gpuBcastIPC in one kernel (gpu.BcastPush): the root's
// kernel pushes the buffer into its slot of every peer's region, raises
// its flags there and is done; each peer's kernel waits for the root's
// flags and copies the slot out, block by block as each block's flag
// comes.
func gpuBcastPush(c *Comm, a *Args, d *devCall) error {
	return d.push(c, a, "bcast", d.rcv.Len(), gpuBcastIPC, func(s *cuda.Stream, st *ipcState) error {
		return gpu.BcastPush(s, st.reg, st.pc, a.Root, bytesOf(d.rcv, 0, d.rcv.Len()))
	})
}

// push runs one push kernel (launch) for a call of size bytes per slot:
// every rank runs fallback instead where the regions or the kernels do not
// serve. The kernel is queued on the stream of the regions' device and
// waited for, again and again while it gives up waiting (pushSlice) and
// the peers live and the call stands (pushWait).
func (d *devCall) push(c *Comm, a *Args, what string, size int, fallback func(*Comm, *Args, *devCall) error, launch func(*cuda.Stream, *ipcState) error) error {
	st, err := c.ipcRegions(d, size)
	if err != nil {
		return err
	}
	if st == nil || !st.push {
		countPush(what, true)
		return fallback(c, a, d)
	}
	countPush(what, false)
	// Before anything can fail: every rank that runs this call counts it
	// alike, and this rank's writes (if any) go to the set it takes now.
	st.pc = st.nextPush(c, d.phase)
	s, spin := d.s, st.spin
	if st.dev != d.dev {
		// This call's buffers are on another device than the region (the
		// rank switched devices after the communicator's first GPU call):
		// the kernel runs on the region's device, which addresses the
		// peers' regions, and reaches the buffers by peer access. Its
		// completion word does not order its stores there: the stream's
		// synchronization does (gpu.PushWords.Wait).
		spin = 0
		if err := gpu.EnablePeerAccess(st.dev, d.dev); err != nil {
			return fmt.Errorf("GPU %s: device %d reaching device %d: %w", what, st.dev, d.dev, err)
		}
		if s, err = devStream(st.dev); err != nil {
			return err
		}
	}
	// The device's resident kernel runs the call where the buffers are
	// on the region's device (ipcState.server); a rank whose kernel is
	// not resident launches it, which its peers cannot tell apart.
	st.reg.Server = nil
	if st.dev == d.dev {
		st.reg.Server = st.server
	}
	if st.reg.Server != nil {
		// The kernel's stores to the error and completion words may reach
		// host memory after its answer: poll them (gpu.PushRegion), as
		// long as a wait of the kernel's.
		spin = max(spin, pushSlice+time.Millisecond)
	}
	var idle *p2p.Idler // set once the kernel first gave up waiting
	t0 := uint64(0)
	// abandon ends a call whose kernel gave up at least once: the blocks'
	// count goes back to zero (PushRegion.ResetCount; the kernel has
	// ended, Wait synchronized the stream).
	abandon := func(err error) error {
		rerr := st.reg.ResetCount(s, cuda.DevicePtr(st.own.Ptr()))
		if rerr == nil {
			// The next call may go to the resident kernel, which runs on
			// a stream of its own: the reset must be done before.
			rerr = s.Synchronize()
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("reset the push kernels' block count: %w", rerr))
		}
		return fmt.Errorf("GPU %s: %w", what, err)
	}
	for {
		if err := launch(s, st); err != nil {
			if idle != nil || st.reg.Server != nil {
				// A served call may have failed with some blocks done.
				return abandon(err)
			}
			return err
		}
		if size == 0 {
			return nil // the launchers queue nothing for empty buffers
		}
		gaveUp, err := st.words.Wait(s, st.pc.Seq, spin)
		if err != nil {
			return fmt.Errorf("GPU %s: %w", what, err)
		}
		if !gaveUp {
			return nil
		}
		if idle == nil {
			// The watchdog ticks only for communicators with waiters.
			i := c.E.Idler()
			idle, t0 = &i, c.sh.tick.Load()
			c.sh.waiters.Add(1)
			defer c.sh.waiters.Add(-1)
		}
		if err := c.pushWait(idle, t0); err != nil {
			return abandon(err)
		}
	}
}

// localRanks is how many ranks of the job run on this host
// (SetLocalRanks); ownGPUs, how many GPUs of its own this rank sees (0:
// none, or some that another rank of the host sees too), and ownVisible
// the CUDA_VISIBLE_DEVICES they were told from.
var (
	localRanks = 1
	ownGPUs    int
	ownVisible string
)

// SetLocalRanks tells the package how many ranks of the job run on this
// host (the launcher's placement; 1 when unknown) and how many GPUs this
// rank sees that no other rank of the host sees, where every rank there
// sees GPUs of its own (their placements: CUDA_VISIBLE_DEVICES set apart
// for each rank, as a scheduler's binding of GPUs to tasks does), else 0.
func SetLocalRanks(n, own int) { localRanks, ownGPUs, ownVisible = max(n, 1), own, visibleEnv() }

// visibleEnv is CUDA_VISIBLE_DEVICES, or a string no value can be where
// it is unset.
func visibleEnv() string {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		return v
	}
	return "\x00unset"
}

// gpusEnough reports whether the ranks of this host are taken to use a
// GPU each (gpusApart). Where ranks outnumber the GPUs, some share one,
// and a resident kernel would hold back the kernels of the other process
// on its device by a time slice a call (ipcState.shared), even where the
// communicator at hand has one rank a GPU (the hierarchical algorithms'
// sub-communicators): no rank hands calls to one then. A program that
// puts ranks of one host on one GPU while there are GPUs enough sets
// GORUN_COLL_GPU_SERVE=0.
var gpusEnough = sync.OnceValue(func() bool {
	n, err := gpu.DeviceCount()
	return err == nil && gpusApart(n, localRanks, ownGPUs, ownVisible == visibleEnv())
})

// gpusApart reports, for a rank whose CUDA sees devices GPUs, whether the
// ranks of its host (ranks of them) use a GPU each: every one sees GPUs
// of its own (own of them here, SetLocalRanks), as long as CUDA sees just
// those (a device cgroup that the placement could not see, or
// CUDA_VISIBLE_DEVICES changed since Init, makes them differ: sameEnv);
// or the host has at least as many GPUs as ranks, assumed to take one
// each, as most programs do (a communicator whose ranks share a device
// launches its calls all the same: ipcState.shared).
func gpusApart(devices, ranks, own int, sameEnv bool) bool {
	return own > 0 && devices == own && sameEnv || ranks <= devices
}

// pushWait is what a push call does each time its kernel gave up
// waiting: it lets the engine poll its transports and run its idle hooks
// (window requests, which this rank serves while it waits) and checks what
// shmWait checks: the call aborted by a notice, a peer failed or gone (it
// exited or closed its transport: Engine.Check), the communicator
// revoked; after a stall period it asks the others what they run (a rank
// that ran another algorithm for this call, with mismatched counts, is
// found this way).
//
// Unlike shmWait it does not look at the awaited data again after a
// peer is found gone: a rank closes its transport only in Finalize, after
// the world's barrier, which this rank has not reached while it is in a
// push call (push kernels run in blocking calls only), so in a correct
// program no peer of a push call in progress can be gone.
func (c *Comm) pushWait(idle *p2p.Idler, t0 uint64) error {
	// An Idler polls and runs the hooks on every 64th Idle while it spins,
	// on every one once it yields or sleeps.
	for i := 0; i < 64 && !idle.Sleeping(); i++ {
		idle.Idle()
	}
	if idle.Sleeping() {
		idle.Idle()
	}
	if err := c.sh.check(c); err != nil {
		return err
	}
	for r, w := range c.World {
		if r != c.Me {
			if err := c.E.Check(w); err != nil {
				return fmt.Errorf("waiting for rank %d: %w", r, err)
			}
		}
	}
	if err := c.E.Revoked(c.Ctx); err != nil {
		return err
	}
	if !c.queried && c.sh.tick.Load()-t0 >= 3 {
		c.queried = true
		c.sh.query(c)
	}
	return nil
}
