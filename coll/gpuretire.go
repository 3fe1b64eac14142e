package coll

import (
	"errors"
	"sync"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/p2p"
)

// Freed communicators' IPC regions (gpuipc.go). Comm.Free does not wait
// for the peers, and freeing device memory that another process still
// maps is undefined in CUDA, so a rank cannot free its own region when it
// frees the communicator; kept until the process ended, each region (16
// to 64 MiB a rank) leaked with every communicator made and freed: 3.4 to
// 3.9 GiB a device over ~75 of them in the GPU soak (bench/collsoak).
//
// So each rank, when it frees a communicator, unmaps the peers' regions
// and tells each peer so (a notice naming the peer's region by its IPC
// handle), and retires its own region: it frees it once every peer has
// said so. The notices travel on a channel that outlives the communicator
// and its context id: the world's collective context, on sub-channel
// subRetire of sequence 0, which no call's tags use (comm.go, SetRetire). They are
// taken in whenever a rank frees a communicator or sets up a region, so
// memory comes back before more is allocated. A peer that never frees the
// communicator (or dies, or the world is revoked) leaves the region
// allocated, as before.

var retire retirer

// retirer is the process's retired regions and its receive of notices.
type retirer struct {
	mu  sync.Mutex
	e   *p2p.Engine
	ctx uint32
	on  bool
	// armed: this process has set up a region, so peers may send it
	// notices; until then it posts no receive (a process without GPU
	// collectives never does).
	armed bool
	r     *p2p.Request // the posted receive of the next notice
	buf   [handleBytes]byte
	// regions: this rank's retired regions by handle, with the world
	// ranks still to say they unmapped them; early: notices that came
	// before the region was retired here.
	regions map[[handleBytes]byte]*retiredRegion
	early   map[[handleBytes]byte][]int
}

// handleBytes is the length of a region's name in a notice: its CUDA IPC
// memory handle.
const handleBytes = 64

type retiredRegion struct {
	own  gpu.Buffer
	wait map[int]bool
}

// SetRetire names the communicator whose collective context carries the
// notices: package mpi passes the world's at Init.
func SetRetire(world *Comm) {
	retire.mu.Lock()
	defer retire.mu.Unlock()
	retire.e, retire.ctx, retire.on = world.E, world.Ctx, true
}

// retireRegions tells the peers (world ranks world[r]) of st that this
// rank has unmapped their regions, and retires its own; st has been
// unmapped. Without the channel (SetRetire not called) the own region
// stays allocated.
func retireRegions(st *ipcState, world []int, me int) {
	retire.mu.Lock()
	defer retire.mu.Unlock()
	if !retire.on {
		return
	}
	for r, h := range st.handles {
		if r != me && h != ([handleBytes]byte{}) {
			msg := h // a buffer of its own: the send may complete later
			_, err := retire.e.Isend(retire.ctx, world[r], subRetire, msg[:], false)
			if errors.Is(err, p2p.ErrClosed) {
				retire.on = false // the process is ending
				return
			}
			// Another error (the peer failed): its region stays
			// allocated there, safely.
		}
	}
	if st.own.Len() > 0 {
		retire.keep(st.own, st.handles[me], world, me)
		st.own = gpu.Buffer{}
	}
	retire.takeLocked()
}

// keep frees own, this rank's region exported as h, once every peer has
// said it unmapped it: now if none can have it mapped (h zero: it was
// never exported; ipcSetup records the handle as soon as it has one,
// before any peer can map it) or every notice came already, else when the
// last comes (takeLocked); rt.mu is held.
func (rt *retirer) keep(own gpu.Buffer, h [handleBytes]byte, world []int, me int) {
	x := &retiredRegion{own: own, wait: map[int]bool{}}
	if h != ([handleBytes]byte{}) {
		for r, w := range world {
			if r != me {
				x.wait[w] = true
			}
		}
		for _, w := range rt.early[h] {
			delete(x.wait, w)
		}
		delete(rt.early, h)
	}
	if len(x.wait) == 0 {
		own.Free()
		return
	}
	if rt.regions == nil {
		rt.regions = map[[handleBytes]byte]*retiredRegion{}
	}
	rt.regions[h] = x
}

// reclaim takes in the notices that have come and frees the regions
// every peer has unmapped.
func reclaim() {
	retire.mu.Lock()
	defer retire.mu.Unlock()
	retire.takeLocked()
}

// arm is reclaim for a rank about to set up a region: from now on it
// listens for notices.
func arm() {
	retire.mu.Lock()
	defer retire.mu.Unlock()
	retire.armed = true
	retire.takeLocked()
}

// takeLocked takes in every notice that has come; rt.mu is held.
func (rt *retirer) takeLocked() {
	if !rt.on || !rt.armed {
		return
	}
	rt.e.Progress()
	for {
		if rt.r == nil {
			r, err := rt.e.Irecv(rt.ctx, p2p.AnySource, subRetire, rt.buf[:])
			if err != nil {
				rt.on = false
				return
			}
			rt.r = r
		}
		if !rt.r.Done() {
			return
		}
		st, err := rt.r.Result()
		rt.e.Release(rt.r)
		rt.r = nil
		if err != nil || st.Bytes != handleBytes {
			rt.on = false // closed, revoked, or not a notice: stop listening
			return
		}
		rt.unmapped(rt.buf, st.Source)
	}
}

// unmapped records that world rank w has unmapped region h, freeing it
// when w was the last; rt.mu is held.
func (rt *retirer) unmapped(h [handleBytes]byte, w int) {
	x := rt.regions[h]
	if x == nil {
		if rt.early == nil {
			rt.early = map[[handleBytes]byte][]int{}
		}
		rt.early[h] = append(rt.early[h], w)
		return
	}
	delete(x.wait, w)
	if len(x.wait) == 0 {
		x.own.Free()
		delete(rt.regions, h)
	}
}
