package gpu

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/gpu/kernels"
)

// reduceThreads is the block size of reduce launches: with 2048 resident
// threads per SM on sm_80 and sm_90, four such blocks fill an SM.
const reduceThreads = 512

// kernelSet is the reduce module loaded into one device's context.
type kernelSet struct {
	mod       *cuda.Module
	fns       map[[2]uint8]*cuda.Function // by (Op, DType)
	push      map[[2]uint8]*cuda.Function // allreduce push kernels; empty for an older PTX
	rspush    map[[2]uint8]*cuda.Function // reduce-scatter push kernels; likewise
	rdpush    map[[2]uint8]*cuda.Function // reduce push kernels; likewise
	agpush    *cuda.Function              // the allgather push kernel; likewise
	bcpush    *cuda.Function              // the broadcast push kernel; likewise
	serve     *cuda.Function              // the resident kernel (Server); likewise
	maxBlocks int                         // one wave of resident blocks
}

var (
	kernelMu   sync.Mutex
	kernelSets = map[cuda.Device]*kernelSet{}
)

// reducePTX returns the PTX to load: the embedded one, or GORUN_GPU_PTX's.
func reducePTX() ([]byte, string, error) {
	if path := getenv(envPTX, ""); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("gpu: %s: %w", envPTX, err)
		}
		return b, path, nil
	}
	return kernels.ReducePTX, "embedded reduce.ptx", nil
}

// kernelsFor loads the reduce kernels into c once (the driver JIT-compiles
// the PTX then: tens of milliseconds) and caches them for the process.
func kernelsFor(c *cuda.Context) (*kernelSet, error) {
	kernelMu.Lock()
	defer kernelMu.Unlock()
	if ks, ok := kernelSets[c.Device()]; ok {
		return ks, nil
	}
	ptx, src, err := reducePTX()
	if err != nil {
		return nil, err
	}
	mod, err := c.LoadModule(ptx)
	if err != nil {
		return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
	}
	ks := &kernelSet{mod: mod, fns: map[[2]uint8]*cuda.Function{}, push: map[[2]uint8]*cuda.Function{},
		rspush: map[[2]uint8]*cuda.Function{}, rdpush: map[[2]uint8]*cuda.Function{}}
	entries := kernels.Entries(ptx)
	if !kernels.PushCurrent(ptx) {
		// An older PTX (GORUN_GPU_PTX): its push kernels take other
		// parameters; the collectives run the algorithms they replace.
		entries = slices.DeleteFunc(entries, func(e string) bool { return strings.Contains(e, "push") })
	}
	if !kernels.ServeCurrent(ptx) {
		// An older resident kernel would wait for good for blocks that
		// never start (kernels.ServeCurrent): the calls launch.
		entries = slices.DeleteFunc(entries, func(e string) bool { return e == kernels.ServeName })
	}
	for _, op := range Ops {
		for _, dt := range DTypes {
			f, err := mod.Function(kernels.ReduceName(op.String(), dt.kernelName()))
			if err != nil {
				_ = mod.Unload()
				return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
			}
			ks.fns[[2]uint8{uint8(op), uint8(dt)}] = f
			// The push kernels are optional: a PTX from GORUN_GPU_PTX
			// that predates them loads, and the collectives that would
			// use them run another algorithm.
			for _, k := range []struct {
				name string
				into map[[2]uint8]*cuda.Function
			}{
				{kernels.AllreducePushName(op.String(), dt.kernelName()), ks.push},
				{kernels.ReduceScatterPushName(op.String(), dt.kernelName()), ks.rspush},
				{kernels.ReducePushName(op.String(), dt.kernelName()), ks.rdpush},
			} {
				if f, err = optionalFunction(mod, entries, k.name); err != nil {
					_ = mod.Unload()
					return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
				}
				if f != nil {
					k.into[[2]uint8{uint8(op), uint8(dt)}] = f
				}
			}
		}
	}
	for _, k := range []struct {
		name string
		into **cuda.Function
	}{{kernels.AllgatherPushName, &ks.agpush}, {kernels.BcastPushName, &ks.bcpush}, {kernels.ServeName, &ks.serve}} {
		if *k.into, err = optionalFunction(mod, entries, k.name); err != nil {
			_ = mod.Unload()
			return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
		}
	}
	d := c.Device()
	sms, err := d.Attribute(cuda.AttrMultiprocessorCount)
	if err != nil {
		_ = mod.Unload()
		return nil, fmt.Errorf("gpu: load kernels: %w", err)
	}
	perSM, err := d.Attribute(cuda.AttrMaxThreadsPerMultiprocessor)
	if err != nil {
		_ = mod.Unload()
		return nil, fmt.Errorf("gpu: load kernels: %w", err)
	}
	ks.maxBlocks = max(1, sms*max(1, perSM/reduceThreads))
	kernelSets[d] = ks
	return ks, nil
}

// optionalFunction returns mod's kernel called name, or nil when the PTX
// (whose entries are listed) does not define it.
func optionalFunction(mod *cuda.Module, entries []string, name string) (*cuda.Function, error) {
	if !slices.Contains(entries, name) {
		return nil, nil
	}
	return mod.Function(name)
}

// Reduce queues dst[i] = a[i] op b[i] for every element on stream s and
// returns without waiting. dst may be a or b (in place). The three buffers
// must have the same element type and length; they may live on any device
// that s's device can address (its own, or a peer's with peer access
// enabled: a kernel reading a peer's buffer over NVLink). When all three are
// 16-byte aligned, as Alloc's are, the kernel moves 16 bytes per access.
func Reduce(s *cuda.Stream, op Op, dst, a, b Buffer) error {
	if !op.Valid() {
		return fmt.Errorf("gpu: reduce: invalid op %v", op)
	}
	dt := dst.dt
	if !dt.Valid() || a.dt != dt || b.dt != dt {
		return fmt.Errorf("gpu: reduce %v: element types %v = %v %v %v differ or are invalid", op, dst.dt, a.dt, op, b.dt)
	}
	if a.bytes != dst.bytes || b.bytes != dst.bytes {
		return fmt.Errorf("gpu: reduce %v: lengths differ: dst %d, a %d, b %d bytes", op, dst.bytes, a.bytes, b.bytes)
	}
	n := dst.Count()
	if n == 0 {
		return nil
	}
	ks, err := kernelsFor(s.Context())
	if err != nil {
		return err
	}
	work := n
	if (dst.ptr|a.ptr|b.ptr)%kernels.ReduceVectorBytes == 0 {
		work = (n*dt.Size() + kernels.ReduceVectorBytes - 1) / kernels.ReduceVectorBytes
	}
	blocks := min(ks.maxBlocks, (work+reduceThreads-1)/reduceThreads)
	f := ks.fns[[2]uint8{uint8(op), uint8(dt)}]
	if err := s.Launch(f, cuda.D1(blocks), cuda.D1(reduceThreads), 0,
		dst.DevicePtr(), a.DevicePtr(), b.DevicePtr(), uint64(n)); err != nil {
		return fmt.Errorf("gpu: reduce %v %v: %w", op, dt, err)
	}
	return nil
}

// LoadKernels loads the reduce kernels into device dev now rather than at
// the first Reduce, so that the driver's JIT compile (tens of milliseconds)
// happens at start-up; it also reports a PTX that does not load.
func LoadKernels(dev int) error {
	c, err := DeviceContext(dev)
	if err != nil {
		return err
	}
	_, err = kernelsFor(c)
	return err
}

// HasPushKernels reports whether device dev's kernels include every
// one-kernel collective over IPC regions: AllreducePush,
// ReduceScatterPush, ReducePush, AllgatherPush and BcastPush (a PTX from
// GORUN_GPU_PTX may predate them).
func HasPushKernels(dev int) bool {
	c, err := DeviceContext(dev)
	if err != nil {
		return false
	}
	ks, err := kernelsFor(c)
	all := len(Ops) * len(DTypes)
	return err == nil && len(ks.push) == all && len(ks.rspush) == all && len(ks.rdpush) == all &&
		ks.agpush != nil && ks.bcpush != nil
}

// PushRegion describes the IPC regions of the push kernels: Table is a
// device array of one u64 per rank, rank r's region as this device
// addresses it; a region holds two sets of Ranks slots of Slot bytes and,
// at byte offset Flags, PushWordBytes(Ranks) bytes of the kernels' words
// (zeroed before first use: kernels/reduce.cu lists them). Words' error
// word is a u32 in host memory mapped for the device, zero before a launch, which the
// kernel sets to 1 when a wait was not satisfied within Timeout; the same
// call may then be launched again, and resumes (the caller decides whether
// to wait longer). Its completion word is a u64 in mapped host memory that the launch
// which completes a call sets to its Seq once the call's stores to its
// GPU's memory are in that GPU's L2 and its stores to the peers' regions
// were released: the caller may poll it instead of synchronizing the
// stream (PushWords.Wait; the kernel may still be retiring, with nothing
// left to do).
type PushRegion struct {
	Table       cuda.DevicePtr
	Ranks, Rank int
	Slot, Flags int
	Words       *PushWords // the error and completion words the kernels write
	Timeout     time.Duration
	// Server, when set, runs the calls on its device's resident kernel
	// instead of launching one (the stream argument is then not used): a
	// push function then returns once the call is over, complete or given
	// up (the Words say which, as after a launch; poll them: the kernel's
	// stores to them may come after its answer). While the Server is held
	// (HoldServer) the call is launched on the stream as without it. The
	// region, buffers and the Server must be on one device.
	Server *Server
}

// PushWordBytes is the size of the push kernels' words after a region's
// slots for n ranks: two data words per (source rank, block), one
// acknowledgement per rank, one progress word per block, and the count of
// blocks done with the current call.
func PushWordBytes(n int) int {
	return 8 * (2*n*kernels.AllreducePushMaxBlocks + n + kernels.AllreducePushMaxBlocks + 1)
}

// ResetCount queues on s the reset of the count of blocks done with the
// current call, in the words of this rank's region (which starts at own):
// the last word (kernels/reduce.cu, Call::fin). Only the block completing
// a call resets it, so a call the host abandoned after some blocks had
// finished (a peer failed, the call was aborted) would leave a partial
// count that completes a later call early, or never. Queue it once the
// kernel has ended, before the next launch.
func (r PushRegion) ResetCount(s *cuda.Stream, own cuda.DevicePtr) error {
	return s.MemsetAsync(own+cuda.DevicePtr(r.Flags+PushWordBytes(r.Ranks)-8), 0, 8)
}

// PushCall is what one call of a push kernel tells it beyond its buffers.
// Seq numbers the call: every rank passes the same, and it grows from call
// to call, starting at 1 (the words start at zero). Set (0 or 1) is the set
// of slots this rank writes in this call: a rank alternates them, and Need
// is the acknowledgement (the Seq of a peer's later call) every peer it
// writes to must have given before the set is written again: one more than
// the Seq of the call that last wrote that set, or 0. A relaunch after a
// timeout passes the same PushCall.
type PushCall struct {
	Seq  uint64
	Set  int
	Need uint64
}

// PushSets is a writer's alternation of its two sets of slots: Next
// numbers a push call, takes the other set than last time, and needs
// every peer it writes to to have acknowledged a call after the one that
// last wrote that set (PushCall). Wrote is, per set, the number of the
// last call that wrote it (a writer that writes a set by other means, as
// coll's ipc algorithms do by their calls' parity, records it there).
type PushSets struct {
	set   int
	Wrote [2]uint64
}

// Next returns call seq's PushCall and records that it writes its set.
func (p *PushSets) Next(seq uint64) PushCall {
	p.set ^= 1
	pc := PushCall{Seq: seq, Set: p.set}
	if last := p.Wrote[p.set]; last != 0 {
		pc.Need = last + 1
	}
	p.Wrote[p.set] = seq
	return pc
}

// wset is the byte offset in a region of the set of slots the call writes.
func (c PushCall) wset(reg PushRegion) uint64 {
	return uint64(c.Set) * uint64(reg.Ranks) * uint64(reg.Slot)
}

// args appends the kernels' parameters from seq on.
func (c PushCall) args(a *cuda.KernelArgs, reg PushRegion) {
	a.U64(c.Seq)
	a.U64(c.wset(reg))
	a.U64(c.Need)
	a.U64(uint64(reg.Slot))
	a.U64(uint64(reg.Flags))
	a.U64(uint64(reg.Timeout.Nanoseconds()))
	a.U64(uint64(reg.Words.Err()))
	a.U64(uint64(reg.Words.Done()))
}

// pushArgs holds the push kernels' parameter blocks between launches, so
// that a launch allocates nothing (cuda.Stream.LaunchArgs).
var pushArgs = sync.Pool{New: func() any { return new(cuda.KernelArgs) }}

// launchPush launches a push kernel with the parameters fill appends, on
// blocks blocks.
func launchPush(s *cuda.Stream, f *cuda.Function, blocks int, fill func(*cuda.KernelArgs)) error {
	a := pushArgs.Get().(*cuda.KernelArgs)
	a.Reset()
	fill(a)
	err := s.LaunchArgs(f, cuda.D1(blocks), cuda.D1(reduceThreads), 0, a)
	pushArgs.Put(a)
	return err
}

// AllreducePushBlocks is the number of blocks an AllreducePush of n bytes
// runs with: one per 8 KiB, at most kernels.AllreducePushMaxBlocks.
func AllreducePushBlocks(n int) int {
	return min(kernels.AllreducePushMaxBlocks, max(1, (n+8<<10-1)>>13))
}

// AllreducePush queues, on stream s, the whole of one allreduce of in into
// out (in may be out) among the ranks of reg: once the peers have
// acknowledged call.Need, this rank's elements pushed into slot reg.Rank of
// set call.Set of every peer's region, data words raised, the peers' data
// words awaited and the contributions folded in rank order. Every rank must
// queue it with the same call.Seq, length, op and type (see PushCall). A
// slot must hold in.
func AllreducePush(s *cuda.Stream, op Op, reg PushRegion, call PushCall, in, out Buffer) error {
	if in.bytes != out.bytes {
		return fmt.Errorf("gpu: allreduce push: %d bytes into %d", in.bytes, out.bytes)
	}
	return reducePush(s, "allreduce", op, reg, call, in, out, 0, -1)
}

// ReduceScatterPush is AllreducePush for a reduce-scatter of equal blocks:
// in holds reg.Ranks blocks of out's length; block p goes to rank p alone,
// and out receives the fold, in rank order, of every rank's block
// reg.Rank. In place, out is in's first block.
func ReduceScatterPush(s *cuda.Stream, op Op, reg PushRegion, call PushCall, in, out Buffer) error {
	if in.bytes != reg.Ranks*out.bytes {
		return fmt.Errorf("gpu: reduce-scatter push: %d bytes in, %d out among %d ranks", in.bytes, out.bytes, reg.Ranks)
	}
	return reducePush(s, "reduce-scatter", op, reg, call, in, out, uint64(out.Count()), -1)
}

// ReducePush is AllreducePush for a reduce to rank root: every other rank
// pushes in into slot reg.Rank of root's region alone, raises its flags
// there and is done (it waits for no peer, and out is not used: it may be
// empty); root awaits every peer's flags and folds the contributions, in
// rank order, into out (of in's length; in may be out).
func ReducePush(s *cuda.Stream, op Op, reg PushRegion, call PushCall, root int, in, out Buffer) error {
	if root < 0 || root >= reg.Ranks {
		return fmt.Errorf("gpu: reduce push: root %d of %d ranks", root, reg.Ranks)
	}
	if reg.Rank != root {
		out = Buffer{dev: in.dev, bytes: in.bytes, dt: in.dt} // no memory: the kernel writes none
	} else if in.bytes != out.bytes {
		return fmt.Errorf("gpu: reduce push: %d bytes into %d", in.bytes, out.bytes)
	}
	return reducePush(s, "reduce", op, reg, call, in, out, 0, root)
}

// reducePush launches the allreduce (stride 0, root -1), reduce-scatter
// (stride: out's length in elements) or reduce (root >= 0) push kernel.
func reducePush(s *cuda.Stream, what string, op Op, reg PushRegion, call PushCall, in, out Buffer, stride uint64, root int) error {
	dt := out.dt
	if !op.Valid() || !dt.Valid() || in.dt != dt {
		return fmt.Errorf("gpu: %s push: %v of %v into %v: mismatched or invalid", what, op, in.dt, dt)
	}
	if out.bytes > reg.Slot {
		return fmt.Errorf("gpu: %s push: %d bytes, slots of %d", what, out.bytes, reg.Slot)
	}
	if out.bytes == 0 {
		return nil
	}
	ks, err := kernelsFor(s.Context())
	if err != nil {
		return err
	}
	fs, name := ks.push, kernels.AllreducePushName(op.String(), dt.kernelName())
	switch {
	case stride != 0:
		fs, name = ks.rspush, kernels.ReduceScatterPushName(op.String(), dt.kernelName())
	case root >= 0:
		fs, name = ks.rdpush, kernels.ReducePushName(op.String(), dt.kernelName())
	}
	f := fs[[2]uint8{uint8(op), uint8(dt)}]
	if f == nil {
		return fmt.Errorf("gpu: %s push: the loaded kernels have no %s", what, name)
	}
	kind := uint64(kindAR)
	switch {
	case stride != 0:
		kind = kindRS
	case root >= 0:
		kind = kindRD
	}
	blocks := AllreducePushBlocks(out.bytes)
	served, err := serveCall(reg, call, kind, op, dt, in.DevicePtr(), out.DevicePtr(), uint64(out.Count()), stride, root, blocks)
	if !served {
		err = launchPush(s, f, blocks, func(a *cuda.KernelArgs) {
			a.U64(uint64(reg.Table))
			a.U64(uint64(in.DevicePtr()))
			a.U64(uint64(out.DevicePtr()))
			a.U64(uint64(out.Count()))
			if stride != 0 {
				a.U64(stride)
			}
			a.U32(uint32(reg.Ranks))
			a.U32(uint32(reg.Rank))
			if root >= 0 {
				a.U32(uint32(root))
			}
			call.args(a, reg)
		})
	}
	if err != nil {
		return fmt.Errorf("gpu: %s push %v %v: %w", what, op, dt, err)
	}
	return nil
}

// AllgatherPush queues, on stream s, one allgather among the ranks of
// reg: in (any element type) pushed into slot reg.Rank of every peer's
// region and copied to block reg.Rank of out (unless it is that block:
// in place), flags raised and awaited, and every peer's slot copied to its
// block of out. out holds reg.Ranks blocks of in's length.
func AllgatherPush(s *cuda.Stream, reg PushRegion, call PushCall, in, out Buffer) error {
	if out.bytes != reg.Ranks*in.bytes || in.bytes > reg.Slot {
		return fmt.Errorf("gpu: allgather push: %d bytes per rank into %d among %d ranks, slots of %d", in.bytes, out.bytes, reg.Ranks, reg.Slot)
	}
	if in.bytes == 0 {
		return nil
	}
	ks, err := kernelsFor(s.Context())
	if err != nil {
		return err
	}
	if ks.agpush == nil {
		return fmt.Errorf("gpu: allgather push: the loaded kernels have no %s", kernels.AllgatherPushName)
	}
	blocks := AllreducePushBlocks(in.bytes)
	served, err := serveCall(reg, call, kindAG, 0, 0, in.DevicePtr(), out.DevicePtr(), uint64(in.bytes), 0, -1, blocks)
	if !served {
		err = launchPush(s, ks.agpush, blocks, func(a *cuda.KernelArgs) {
			a.U64(uint64(reg.Table))
			a.U64(uint64(in.DevicePtr()))
			a.U64(uint64(out.DevicePtr()))
			a.U64(uint64(in.bytes))
			a.U32(uint32(reg.Ranks))
			a.U32(uint32(reg.Rank))
			call.args(a, reg)
		})
	}
	if err != nil {
		return fmt.Errorf("gpu: allgather push: %w", err)
	}
	return nil
}

// BcastPush queues, on stream s, one broadcast of buf (any element type)
// from rank root among the ranks of reg: root's kernel pushes buf into
// slot root of every peer's region, raises its flags there and is done
// (it waits for no peer); every other rank's kernel awaits root's flags and
// copies that slot into buf. A slot must hold buf.
func BcastPush(s *cuda.Stream, reg PushRegion, call PushCall, root int, buf Buffer) error {
	if root < 0 || root >= reg.Ranks || buf.bytes > reg.Slot {
		return fmt.Errorf("gpu: bcast push: %d bytes from root %d of %d ranks, slots of %d", buf.bytes, root, reg.Ranks, reg.Slot)
	}
	if buf.bytes == 0 {
		return nil
	}
	ks, err := kernelsFor(s.Context())
	if err != nil {
		return err
	}
	if ks.bcpush == nil {
		return fmt.Errorf("gpu: bcast push: the loaded kernels have no %s", kernels.BcastPushName)
	}
	blocks := AllreducePushBlocks(buf.bytes)
	served, err := serveCall(reg, call, kindBC, 0, 0, 0, buf.DevicePtr(), uint64(buf.bytes), 0, root, blocks)
	if !served {
		err = launchPush(s, ks.bcpush, blocks, func(a *cuda.KernelArgs) {
			a.U64(uint64(reg.Table))
			a.U64(uint64(buf.DevicePtr()))
			a.U64(uint64(buf.bytes))
			a.U32(uint32(reg.Ranks))
			a.U32(uint32(reg.Rank))
			a.U32(uint32(root))
			call.args(a, reg)
		})
	}
	if err != nil {
		return fmt.Errorf("gpu: bcast push: %w", err)
	}
	return nil
}
