package coll

import (
	"slices"
	"sync"

	"github.com/gorun/gorun/gpu"
)

// Hierarchical GPU collectives, for communicators across hosts (select.go
// picks an algorithm marked hier whenever the communicator spans several
// nodes with several ranks on one of them). Inside a node the bytes move
// between GPUs by CUDA IPC and the copy engines; between nodes they are
// staged through pinned host memory over the network (p2p/stage.go), which
// is one to two orders of magnitude slower. So the network carries each
// byte once per node it must reach: the leaders' forms (bcast, reduce,
// allreduce below its rail threshold) have one rank a node talk across
// the network, the rail forms (allreduce, allgather, reduce-scatter of
// large buffers) every rank, each for its 1/k of the node's share, all at
// once (a node's GPUs each have a NIC on the clusters this is for). Each
// level runs the flat GPU algorithm its table picks for it (the IPC
// regions of gpuipc.go belong to the whole communicator: ipcRegions
// refuses a level's view, which then runs the p2p fallback).
//
// Ranks must pass the same counts (MPI's rule); a rank whose count falls
// on the other side of a threshold from its peers' takes another path
// and the call stalls until the stall query (notice.go) names the
// mismatch, where a flat algorithm would fail with a count error.
//
// Against the flat algorithms on the whole communicator: a flat one-shot
// sends every rank's whole buffer to every rank of the other nodes (n-k
// network transfers per rank for k ranks a node) and a flat ring crosses
// the network 2(n-1) times in a row with n-1 of its steps' latency there;
// the hierarchical allreduce moves 2(m-1)/m of the buffer per leader for m
// nodes in the leaders' flat algorithm, plus a reduce and a broadcast
// inside each node.

// gpuHierRail is GORUN_COLL_GPU_HIER_RAIL, read once: every rank must
// make the same choice for every call.
var gpuHierRail = sync.OnceValue(pGPUHierRail)

// gpuLevel runs collective k's flat algorithm on a level of a hierarchical
// algorithm; on a level of one rank it copies the input to the output
// (gpuCall's single-rank case).
func gpuLevel(k *collective, c *Comm, a *Args) error {
	if c.Size() > 1 {
		return k.runFlat(c, a, nil)
	}
	return gpuCall(k, c, a)
}

// gpuAllreduceHier: from GORUN_COLL_GPU_HIER_RAIL bytes on, when every
// node has as many ranks, by rails (allreduceRails); else each node
// reduces to its leader, the leaders allreduce across the nodes, and each
// leader broadcasts the result on its node, so that every rank has the
// leaders' bits. Commutative operations (every GPU operation is).
func gpuAllreduceHier(c *Comm, a *Args) error {
	if min := gpuHierRail(); min > 0 && a.RecvD.Len() >= min {
		if local, rail := c.rails(); rail != nil {
			return gpuAlg(func(_ *Comm, a *Args, d *devCall) error { return d.allreduceRails(a, local, rail) })(c, a)
		}
	}
	h := c.hier(0)
	la := *a
	la.Root = 0
	if h.leaders == nil {
		// Its input goes to the leader; its output comes from the
		// broadcast.
		la.RecvD = gpu.Buffer{}
		if a.SendD.DType() == 0 {
			la.SendD = a.RecvD
		}
	}
	if err := gpuLevel(collGPUReduce, h.local, &la); err != nil {
		return err
	}
	if h.leaders != nil {
		ga := *a
		ga.SendD = gpu.Buffer{} // in place: the node's sum is in RecvD
		if err := gpuLevel(collGPUAllreduce, h.leaders, &ga); err != nil {
			return err
		}
	}
	ba := *a
	ba.SendD, ba.Root = gpu.Buffer{}, 0
	return gpuLevel(collGPUBcast, h.local, &ba)
}

// gpuBcastHier: the root broadcasts to the other nodes' leaders (the
// root leads its own node), then each leader on its node.
func gpuBcastHier(c *Comm, a *Args) error {
	h := c.hier(a.Root)
	if h.leaders != nil {
		la := *a
		la.Root = h.rootLeader
		if err := gpuLevel(collGPUBcast, h.leaders, &la); err != nil {
			return err
		}
	}
	la := *a
	la.Root = 0
	return gpuLevel(collGPUBcast, h.local, &la)
}

// gpuReduceHier: each node reduces to its leader (the root leads its
// node), into the root's output there and into scratch on the other
// leaders, and the leaders reduce to the root.
func gpuReduceHier(c *Comm, a *Args) (err error) {
	h := c.hier(a.Root)
	own := a.SendD
	if own.DType() == 0 {
		own = a.RecvD // the root in place
	}
	la := *a
	la.Root = 0
	var part gpu.Buffer
	switch {
	case c.Me == a.Root:
		part = a.RecvD // in place stays in place: the root leads its node
	case h.leaders != nil:
		var b gpu.Buffer
		if b, err = getDev(own.Device(), own.Len()); err != nil {
			return err
		}
		// Back to the pool only after success: after a failure a
		// peer's copy into it may still land (devCall.done's rule).
		defer func() {
			if err == nil {
				putDev(b)
			}
		}()
		part = typed(b, own.DType(), 0, own.Len())
		la.RecvD = part
	default:
		la.RecvD = gpu.Buffer{}
	}
	if err := gpuLevel(collGPUReduce, h.local, &la); err != nil {
		return err
	}
	if h.leaders == nil {
		return nil
	}
	ga := *a
	ga.Root = h.rootLeader
	if c.Me == a.Root {
		ga.SendD, ga.RecvD = gpu.Buffer{}, part
	} else {
		ga.SendD, ga.RecvD = part, gpu.Buffer{}
	}
	return gpuLevel(collGPUReduce, h.leaders, &ga)
}

// nodeRanks lists the ranks of every node in rank order (nodes in the
// order of c.Node) when every node has as many ranks; nil otherwise.
func (c *Comm) nodeRanks() [][]int {
	per := make([][]int, c.Nodes)
	for r := range c.Size() {
		per[c.Node[r]] = append(per[c.Node[r]], r)
	}
	for _, p := range per {
		if len(p) != len(per[0]) {
			return nil
		}
	}
	return per
}

// rails returns this rank's node (its ranks in rank order) and its rail
// (the ranks of its index within their node, one per node in node order)
// when every node has as many ranks; nil, nil otherwise.
func (c *Comm) rails() (local, rail *Comm) {
	local, rail, _ = c.railsOf(c.nodeRanks())
	return local, rail
}

// railsOf is rails for per (nodeRanks), also returning this rank's index
// within its node.
func (c *Comm) railsOf(per [][]int) (local, rail *Comm, j int) {
	if per == nil {
		return nil, nil, 0
	}
	mine := per[c.Node[c.Me]]
	j = slices.Index(mine, c.Me)
	ranks := make([]int, len(per))
	for i, p := range per {
		ranks[i] = p[j]
	}
	return c.sub(mine, chLocal), c.sub(ranks, chRail), j
}

// allreduceRails: the node's k ranks reduce-scatter the buffer in k
// blocks over the node's ring (local rank j keeps block j), the ranks of
// index j on every node (a rail) allreduce block j across the nodes, and
// the node's ring allgathers the blocks. Every rank sends 1/k of the
// buffer across the network, all rails at once (a node's GPUs each have
// a NIC of their own on the clusters this is for), where the leaders of
// the reduce-and-broadcast form each send all of it; inside the node the
// ring moves 2(k-1)/k of the buffer a rank against the reduce's and the
// broadcast's whole buffer a level.
func (d *devCall) allreduceRails(a *Args, local, rail *Comm) error {
	j := local.Rank()
	counts, displs := blocks(d.rcv.Len(), local.Size(), a.Elem)
	if err := d.ringReduceScatter(local, d.rcv, counts, displs, 1); err != nil {
		return err
	}
	if counts[j] > 0 { // the same on the whole rail: its ranks share j
		ra := Args{RecvD: typed(d.rcv, d.dt, displs[j], counts[j]), DOp: a.DOp, Elem: a.Elem, Nonblocking: a.Nonblocking}
		if err := gpuLevel(collGPUAllreduce, rail, &ra); err != nil {
			return err
		}
	}
	return d.ringAllgather(local, d.rcv, gpu.Buffer{}, counts, displs, 0)
}

// The smallest block (bytes a rank) the rails take for allgather and
// reduce-scatter (GORUN_COLL_GPU_HIER_RAIL_ALLGATHER, _REDUCE_SCATTER),
// read once; below, the flat algorithms. On two pretend hosts of 2 H100
// (np 4, MEASUREMENTS.md, GPU collectives across hosts) allgather by
// rails took 938 µs at 1 MiB a rank against direct's 1136 and 6.3 ms at
// 16 MiB against 13.0, but 580-830 µs up to 256 KiB against the better
// flat algorithm's 250-500; reduce-scatter 2.5 ms at 4 MiB blocks against
// oneshot's 3.0, 1.73 at 2 MiB against 1.65, and 1.0-1.27 ms up to 256
// KiB blocks against 0.51-0.61.
var (
	gpuHierAllgatherMin     = sync.OnceValue(pGPUHierRailAllgather)
	gpuHierReduceScatterMin = sync.OnceValue(pGPUHierRailReduceScatter)
)

// gpuAllgatherHier, from gpuHierAllgatherMin bytes a rank when every node
// has as many ranks (k), by rails: the ranks of index j on every node
// allgather their blocks across the nodes (each block straight to its
// place in the output), then each node's ranks exchange what their rails
// brought (each block to each of the k-1 local peers). Every rank's block
// crosses the network to the m-1 other nodes once (sent by its rank, or
// forwarded along the rail's ring), all rails at once, where a flat ring
// sends n-1 blocks over each link between nodes. Each rank posts the
// 2m(k-1) transfers of the node exchange at once. Below that, or with
// uneven nodes, it runs the flat algorithm.
func gpuAllgatherHier(c *Comm, a *Args) error {
	var per [][]int // the node layout, only for calls the rails take
	if min := gpuHierAllgatherMin(); min > 0 && a.Counts[c.Rank()] >= min {
		per = c.nodeRanks()
	}
	if per == nil {
		return collGPUAllgather.runFlat(c, a, nil)
	}
	return gpuAlg(func(c *Comm, a *Args, d *devCall) error {
		local, rail, j := c.railsOf(per)
		me, b := c.Rank(), a.Counts[c.Rank()]
		blk := func(r int) gpu.Buffer { return bytesOf(d.rcv, r*b, b) }
		if !d.in {
			if err := d.copy(blk(me), d.own); err != nil {
				return err
			}
		}
		if err := d.sync(); err != nil {
			return err
		}
		// The rail, in place: its blocks at their ranks' places.
		ra := Args{RecvD: d.rcv, Elem: a.Elem, Counts: make([]int, len(per)), Displs: make([]int, len(per)), Nonblocking: a.Nonblocking}
		for i, p := range per {
			ra.Counts[i], ra.Displs[i] = b, p[j]*b
		}
		if err := gpuLevel(collGPUAllgatherv, rail, &ra); err != nil {
			return err
		}
		// The node: local peer q sends the blocks of its rail (index q)
		// from every node, in node order, as this rank sends its own.
		var p pending
		for q := range local.Size() {
			if q == j {
				continue
			}
			for _, nd := range per {
				if err := p.recvD(local, blk(nd[q]), q); err != nil {
					return err
				}
				if err := p.sendD(local, blk(nd[j]), q); err != nil {
					return err
				}
			}
		}
		if err := p.wait(local); err != nil {
			return err
		}
		return d.sync()
	})(c, a)
}

// gpuReduceScatterHier, from gpuHierReduceScatterMin bytes a rank when
// every node has as many ranks (k), by rails:
// the input's blocks are first ordered by rail (rail j's m blocks, of the
// ranks of index j in node order, side by side), each node reduce-scatters
// that in k parts of m blocks (local rank j gets its rail's), and each
// rail reduce-scatters its m blocks across the nodes, so that every rank
// gets its block having sent 1/k of the node's sum over the network, all
// rails at once. Scratch: the reordered input (n blocks) and the rail's
// part (m blocks), besides the levels' own (the flat one-shot's is n
// blocks), kept in the device pool for the process's life as all GPU
// scratch is. Below that, or with uneven nodes, it runs the flat
// algorithm.
func gpuReduceScatterHier(c *Comm, a *Args) error {
	var per [][]int // the node layout, only for calls the rails take
	if min := gpuHierReduceScatterMin(); min > 0 && a.Counts[c.Rank()] >= min {
		per = c.nodeRanks()
	}
	if per == nil {
		return collGPUReduceScatterBlock.runFlat(c, a, nil)
	}
	return gpuAlg(func(c *Comm, a *Args, d *devCall) error {
		local, rail, _ := c.railsOf(per)
		m, k, b := len(per), len(per[0]), a.Counts[c.Rank()]
		byRail, err := d.take(c.Size() * b)
		if err != nil {
			return err
		}
		for q := range k {
			for i, nd := range per {
				if err := d.copy(bytesOf(byRail, (q*m+i)*b, b), bytesOf(d.own, nd[q]*b, b)); err != nil {
					return err
				}
			}
		}
		mine, err := d.take(m * b)
		if err != nil {
			return err
		}
		if err := d.sync(); err != nil { // the copies are in before peers read them
			return err
		}
		nodeCounts, _ := blocks(k*m*b, k, m*b) // k parts of m blocks
		la := Args{SendD: typed(byRail, d.dt, 0, c.Size()*b), RecvD: typed(mine, d.dt, 0, m*b), DOp: a.DOp, Elem: a.Elem,
			Counts: nodeCounts, Nonblocking: a.Nonblocking}
		if err := gpuLevel(collGPUReduceScatterBlock, local, &la); err != nil {
			return err
		}
		railCounts, _ := blocks(m*b, m, b)
		ra := Args{SendD: typed(mine, d.dt, 0, m*b), RecvD: typed(d.rcv, d.dt, 0, b), DOp: a.DOp, Elem: a.Elem,
			Counts: railCounts, Nonblocking: a.Nonblocking}
		return gpuLevel(collGPUReduceScatterBlock, rail, &ra)
	})(c, a)
}
