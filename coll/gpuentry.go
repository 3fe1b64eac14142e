package coll

// The GPU collectives' entry points and selection. Each is registered as a
// collective of its own ("gpu_allreduce", ...), so that GORUN_COLL_GPU_<NAME>
// and SetAlgorithm force an algorithm, and the stall and abort notices of
// notice.go cover GPU calls as they do host ones. The buffers are
// Args.SendD and RecvD; what each entry reads is in its comment.

var (
	collGPUAllreduce, collGPUBcast, collGPUReduce, collGPUAllgather, collGPUReduceScatterBlock, collGPUGather, collGPUScatter, collGPUAlltoall *collective
	// The v forms and the scans (gpuv.go).
	collGPUAllgatherv, collGPUGatherv, collGPUScatterv, collGPUAlltoallv, collGPUScan, collGPUExscan *collective
)

// gpuOneshotMax: up to this many bytes per rank the one-shot algorithms
// (one exchange, then n-1 local reductions) are chosen at any process count;
// at two ranks they are chosen at every size, since a ring moves the same
// bytes there in two steps (MEASUREMENTS.md, GPU collectives). Below
// ipcSlot(n) the IPC regions serve (gpuipc.go; they fall back to the p2p
// algorithm on a communicator across hosts).
const gpuOneshotMax = 256 << 10

// tableGPUAllreduce is tableGPUReduction with the allreduce push kernel
// where the regions serve: on 2×H200 it took 15-17 µs against ipc's 20-21
// from 4 B to 128 KiB, 21.4 against 24.7 at 1 MiB, 31.6 against 32.9 at 4
// MiB (MEASUREMENTS.md, GPU collectives). From three ranks the two-shot
// push (reduce-scatter, then allgather) where its blocks fit the slots and
// the ring was the choice, and from four ranks from gpuTwoshotMin on
// where the one-shot push was: on 4×H100 it took 52.9 µs at 4 MiB against
// the push's 73, 84 at 8 MiB and 154 at 16 MiB against the ring's 177-317
// and 219-248, 38 against 40.5 at 2 MiB, and lost up to 1 MiB (30 against
// 26.4) (MEASUREMENTS.md, GPU collectives at four ranks).
func tableGPUAllreduce(n, size int, commutative bool) string {
	alg := pushForIPC(tableGPUReduction(n, size, commutative))
	if n > 2 && size <= n*ipcSlot(n) && (alg == "ring" || n >= 4 && size >= gpuTwoshotMin) {
		return "twoshot"
	}
	return alg
}

// gpuTwoshotMin is the smallest allreduce the two-shot push takes from
// four ranks on. At three, where each rank's bytes are 2/3 of the
// one-shot's instead of 1/2, the one-shot push stays up to a slot: on
// three of 4×H200 it took 20-47 µs from 1 to 4 MiB against the two-shot's
// 38-57 (MEASUREMENTS.md, GPU collectives at four ranks).
const gpuTwoshotMin = 2 << 20

// tableGPUReduceScatter and tableGPUAllgather take the push kernels where
// ipc served, as the allreduce does (MEASUREMENTS.md, GPU collectives).
func tableGPUReduceScatter(n, size int, commutative bool) string {
	return pushForIPC(tableGPUReduction(n, size, commutative))
}

func tableGPUAllgather(n, size int, commutative bool) string {
	return pushForIPC(tableGPUAllgatherBase(n, size, commutative))
}

// pushForIPC is the push kernel where a table chose ipc.
func pushForIPC(alg string) string {
	if alg == "ipc" {
		return "push"
	}
	return alg
}

func tableGPUReduction(n, size int, _ bool) string {
	switch {
	case size <= ipcSlot(n):
		return "ipc"
	case n <= 2 || size <= gpuOneshotMax:
		return "oneshot"
	}
	return "ring"
}

// tableGPUReduce is the reduce push kernel where the p2p one-shot was
// the choice and the regions serve (up to a slot): on 2×H200 it took
// 17.6-20.6 µs against the one-shot's 22.5-24.6 from 4 B to 256 KiB,
// 32.7 against 36.1 at 4 MiB (MEASUREMENTS.md, GPU collectives). From
// three ranks above gpuOneshotMax the ring stays: every rank's whole
// vector into the root's region has not been measured against it.
func tableGPUReduce(n, size int, _ bool) string {
	if n > 2 && size > gpuOneshotMax {
		return "ring"
	}
	if size <= ipcSlot(n) {
		return "push"
	}
	return "oneshot"
}

func tableGPUAllgatherBase(n, size int, _ bool) string {
	switch {
	case size <= ipcSlot(n):
		return "ipc"
	case n <= 2 || size*n <= gpuOneshotMax:
		return "direct"
	}
	return "ring"
}

// tableGPUBcast is the broadcast push kernel where the regions serve (up
// to a slot): on 2×H200 it took 16.9-18.4 µs against ipc's 19.8-22.6 from
// 1 B to 256 KiB, 31.0 against 34.4 at 4 MiB (MEASUREMENTS.md, GPU
// collectives). Beyond a slot the binomial tree, and from three ranks
// on the pipelined chain for large buffers (gpuPipeMin).
func tableGPUBcast(n, size int, _ bool) string {
	switch {
	case size <= ipcSlot(n):
		return "push"
	case n > 2 && size >= gpuPipeMin:
		return "pipe"
	}
	return "binomial"
}

// gpuPipeMin is the smallest broadcast the pipelined chain takes from
// three ranks on: on 4 H100 it took 329-339 µs at 64 MiB against the
// binomial tree's 389, 3.1 ms at 1 GiB against 6.2; the tree won at 16
// and 32 MiB (115 and 206 µs against 140-155 and 256-296)
// (MEASUREMENTS.md, GPU collectives at four ranks).
const gpuPipeMin = 64 << 20

func gpuBlock(_ *Comm, a *Args) int {
	if len(a.Counts) == 0 {
		return 0
	}
	return a.Counts[0]
}

func init() {
	recvLen := func(_ *Comm, a *Args) int { return a.RecvD.Len() }
	ownLen := func(_ *Comm, a *Args) int {
		if a.SendD.Len() > 0 {
			return a.SendD.Len()
		}
		return a.RecvD.Len()
	}
	linear := func(int, int, bool) string { return "linear" }
	collGPUAllreduce = register(&collective{name: "gpu_allreduce", algs: []algorithm{
		{name: "oneshot", run: gpuAlg(gpuAllreduceOneshot)},
		{name: "ring", run: gpuAlg(gpuAllreduceRing)},
		{name: "ipc", run: gpuAlg(gpuAllreduceIPC)},
		{name: "push", run: gpuAlg(gpuAllreducePush)},
		{name: "twoshot", run: gpuAlg(gpuAllreduceTwoshot)},
		{name: "hier", run: gpuAllreduceHier, commutative: true, hier: true},
	}, table: tableGPUAllreduce, size: recvLen})
	collGPUBcast = register(&collective{name: "gpu_bcast", algs: []algorithm{
		{name: "binomial", run: gpuAlg(gpuBcastBinomial)},
		{name: "ipc", run: gpuAlg(gpuBcastIPC)},
		{name: "push", run: gpuAlg(gpuBcastPush)},
		{name: "pipe", run: gpuAlg(gpuBcastPipe)},
		{name: "hier", run: gpuBcastHier, hier: true},
	}, table: tableGPUBcast, size: recvLen})
	collGPUReduce = register(&collective{name: "gpu_reduce", algs: []algorithm{
		{name: "oneshot", run: gpuAlg(gpuReduceOneshot)},
		{name: "ring", run: gpuAlg(gpuReduceRing)},
		{name: "push", run: gpuAlg(gpuReducePush)},
		{name: "hier", run: gpuReduceHier, commutative: true, hier: true},
	}, table: tableGPUReduce, size: ownLen})
	collGPUAllgather = register(&collective{name: "gpu_allgather", algs: []algorithm{
		{name: "direct", run: gpuAlg(gpuAllgatherDirect)},
		{name: "ring", run: gpuAlg(gpuAllgatherRing)},
		{name: "ipc", run: gpuAlg(gpuAllgatherIPC)},
		{name: "push", run: gpuAlg(gpuAllgatherPush)},
		{name: "hier", run: gpuAllgatherHier, hier: true},
	}, table: tableGPUAllgather, size: gpuBlock})
	collGPUReduceScatterBlock = register(&collective{name: "gpu_reduce_scatter_block", algs: []algorithm{
		{name: "oneshot", run: gpuAlg(gpuReduceScatterOneshot)},
		{name: "ring", run: gpuAlg(gpuReduceScatterRing)},
		{name: "ipc", run: gpuAlg(gpuReduceScatterIPC)},
		{name: "push", run: gpuAlg(gpuReduceScatterPush)},
		{name: "hier", run: gpuReduceScatterHier, commutative: true, hier: true},
	}, table: tableGPUReduceScatter, size: gpuBlock})
	collGPUGather = register(&collective{name: "gpu_gather", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuGatherLinear)},
	}, table: linear, size: gpuBlock})
	collGPUScatter = register(&collective{name: "gpu_scatter", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuScatterLinear)},
	}, table: linear, size: gpuBlock})
	collGPUAlltoall = register(&collective{name: "gpu_alltoall", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuAlltoallLinear)},
	}, table: linear, size: gpuBlock})
	// The v forms: the algorithms of the equal-block forms, which read
	// a.Displs where it is set (displsOf); no IPC (its slots hold equal
	// blocks). Not measured: the allgatherv table is the allgather one's
	// p2p part, on the whole gathered size.
	varTotal := func(_ *Comm, a *Args) int { return sum(a.Counts) }
	collGPUAllgatherv = register(&collective{name: "gpu_allgatherv", algs: []algorithm{
		{name: "direct", run: gpuAlg(gpuAllgatherDirect)},
		{name: "ring", run: gpuAlg(gpuAllgatherRing)},
	}, table: tableGPUAllgatherv, size: varTotal})
	collGPUGatherv = register(&collective{name: "gpu_gatherv", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuGatherLinear)},
	}, table: linear, size: func(*Comm, *Args) int { return 0 }, varSize: true})
	collGPUScatterv = register(&collective{name: "gpu_scatterv", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuScatterLinear)},
	}, table: linear, size: func(*Comm, *Args) int { return 0 }, varSize: true})
	collGPUAlltoallv = register(&collective{name: "gpu_alltoallv", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuAlltoallLinear)},
	}, table: linear, size: varTotal, varSize: true})
	collGPUScan = register(&collective{name: "gpu_scan", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuScanLinear)},
	}, table: linear, size: ownLen})
	collGPUExscan = register(&collective{name: "gpu_exscan", algs: []algorithm{
		{name: "linear", run: gpuAlg(gpuExscanLinear)},
	}, table: linear, size: ownLen})
}

func tableGPUAllgatherv(n, total int, _ bool) string {
	if n <= 2 || total <= gpuOneshotMax {
		return "direct"
	}
	return "ring"
}

// gpuCall runs a GPU collective; on a communicator of one rank it copies
// the input to the output (unless in place) and returns.
func gpuCall(k *collective, c *Comm, a *Args) error {
	if c.Size() > 1 {
		return k.call(c, a, nil)
	}
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	if !d.in && d.rcv.Len() > 0 && d.own.Len() > 0 {
		if err := d.copy(bytesOf(d.rcv, 0, min(d.rcv.Len(), d.own.Len())), d.own); err != nil {
			return err
		}
	}
	return d.sync()
}

// AllreduceGPU combines every rank's a.SendD (zero: in place, in a.RecvD)
// with a.DOp into every rank's a.RecvD; a.Elem is the element size.
func AllreduceGPU(c *Comm, a *Args) error { return gpuCall(collGPUAllreduce, c, a) }

// BcastGPU copies the root's a.RecvD into every rank's a.RecvD.
func BcastGPU(c *Comm, a *Args) error { return gpuCall(collGPUBcast, c, a) }

// ReduceGPU combines every rank's a.SendD (the root's may be zero: in
// place, in a.RecvD) into the root's a.RecvD.
func ReduceGPU(c *Comm, a *Args) error { return gpuCall(collGPUReduce, c, a) }

// AllgatherGPU collects every rank's a.SendD (zero: in place, already at
// block r of a.RecvD) into every rank's a.RecvD; a.Counts holds the block
// size n times.
func AllgatherGPU(c *Comm, a *Args) error { return gpuCall(collGPUAllgather, c, a) }

// ReduceScatterBlockGPU reduces every rank's a.SendD (n blocks of
// a.Counts[r] bytes; zero: in place, the input in a.RecvD) and leaves block
// r at the start of rank r's a.RecvD.
func ReduceScatterBlockGPU(c *Comm, a *Args) error {
	return gpuCall(collGPUReduceScatterBlock, c, a)
}

// GatherGPU collects every rank's a.SendD into the root's a.RecvD (block r
// at r*a.Counts[0]); the root's a.SendD may be zero (in place).
func GatherGPU(c *Comm, a *Args) error { return gpuCall(collGPUGather, c, a) }

// ScatterGPU sends block r of the root's a.SendD to rank r's a.RecvD; the
// root's a.RecvD may be zero (in place).
func ScatterGPU(c *Comm, a *Args) error { return gpuCall(collGPUScatter, c, a) }

// AlltoallGPU sends block r of every rank's a.SendD to rank r, which puts
// it at block (sender) of its a.RecvD. In place (a.SendD zero) through a
// scratch copy of a.RecvD.
func AlltoallGPU(c *Comm, a *Args) error {
	return alltoallDevInPlace(c, a, func(c *Comm, a *Args) error { return gpuCall(collGPUAlltoall, c, a) })
}
