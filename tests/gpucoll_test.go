package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["gpu-coll"] = caseGPUColl }

// The GPU collectives' inputs are drawn so that every result is exact in
// every element type: halves k/2 with 1 <= |k| <= 16 for floats (sums of up
// to four ranks stay within bfloat16's 8 significant bits), integers
// 1 <= |k| <= 16 (uint8: 1..16), and for products only ±1/2, ±1, ±2 (±1,
// ±2 for integers; 1, 2 for uint8). The reference is computed in float64
// and encoded in the element type, so results are compared bit for bit,
// on every rank: every rank's bits are the reference's, hence each other's.

// gpuVal draws one input value of type dt for op.
func gpuVal(r *rand.Rand, dt gpu.DType, op mpi.Op) float64 {
	float := dt == gpu.Float32 || dt == gpu.Float64 || dt == gpu.Float16 || dt == gpu.BFloat16
	sign := float64(1)
	if dt != gpu.Uint8 && r.IntN(2) == 0 {
		sign = -1
	}
	if op == mpi.Prod {
		if float {
			return sign * []float64{0.5, 1, 2}[r.IntN(3)]
		}
		return sign * float64(1+r.IntN(2))
	}
	k := float64(1 + r.IntN(16))
	if float {
		return sign * k / 2
	}
	return sign * k
}

// gpuEncode writes v, exact in dt, as dt's bytes.
func gpuEncode(dst []byte, dt gpu.DType, v float64) {
	switch dt {
	case gpu.Float32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(v)))
	case gpu.Float64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(v))
	case gpu.BFloat16:
		binary.LittleEndian.PutUint16(dst, uint16(math.Float32bits(float32(v))>>16))
	case gpu.Float16:
		binary.LittleEndian.PutUint16(dst, half(float32(v)))
	case gpu.Int32:
		binary.LittleEndian.PutUint32(dst, uint32(int32(v)))
	case gpu.Int64:
		binary.LittleEndian.PutUint64(dst, uint64(int64(v)))
	case gpu.Uint8:
		dst[0] = uint8(v)
	}
}

// half encodes f, a normal float16 value or zero with few significant
// bits (as gpuVal's are), as IEEE binary16.
func half(f float32) uint16 {
	b := math.Float32bits(f)
	s := uint16(b>>16) & 0x8000
	if b&0x7fffffff == 0 {
		return s
	}
	e := int((b>>23)&0xff) - 127 + 15
	return s | uint16(e)<<10 | uint16((b>>13)&0x3ff)
}

// gpuFold is op on float64s.
func gpuFold(op mpi.Op, a, b float64) float64 {
	switch op {
	case mpi.Sum:
		return a + b
	case mpi.Prod:
		return a * b
	case mpi.Min:
		return math.Min(a, b)
	}
	return math.Max(a, b)
}

// gpuColl is one rank's state in caseGPUColl: inputs of every rank are
// drawn from (seed, rank, call), so each rank computes the reference alone.
type gpuColl struct {
	w        *mpi.Comm
	dev      int
	seed     uint64
	call     uint64
	send     gpu.Buffer // bytes, sliced and retyped per call
	recv     gpu.Buffer
	checked  int
	failures []string
}

// newGPUColl is a case's state on its rank's GPU (testDevice), refusing
// forced push kernels that the loaded PTX lacks (pushForcedAbsent).
func newGPUColl(w *mpi.Comm) (*gpuColl, error) {
	dev, err := testDevice(w.Rank())
	if err != nil {
		return nil, err
	}
	if err := pushForcedAbsent(dev); err != nil {
		return nil, err
	}
	return &gpuColl{w: w, dev: dev}, nil
}

// buffers allocates the case's send and receive buffers, n elements of dt
// each on its GPU; free gives both back.
func (g *gpuColl) buffers(dt gpu.DType, n int) (free func(), err error) {
	if g.send, err = gpu.Alloc(g.dev, dt, n); err != nil {
		return nil, err
	}
	if g.recv, err = gpu.Alloc(g.dev, dt, n); err != nil {
		g.send.Free()
		return nil, err
	}
	return func() { g.send.Free(); g.recv.Free() }, nil
}

// input returns rank r's count values for the current call.
func (g *gpuColl) input(r, count int, dt gpu.DType, op mpi.Op) []float64 {
	rng := rand.New(rand.NewPCG(g.seed, g.call<<16|uint64(r)))
	v := make([]float64, count)
	for i := range v {
		v[i] = gpuVal(rng, dt, op)
	}
	return v
}

func encodeAll(dt gpu.DType, v []float64) []byte {
	b := make([]byte, len(v)*dt.Size())
	for i, x := range v {
		gpuEncode(b[i*dt.Size():], dt, x)
	}
	return b
}

// view returns count elements of dt at the start of b.
func view(b gpu.Buffer, dt gpu.DType, count int) gpu.Buffer {
	return gpu.Wrap(b.Device(), b.Ptr(), dt, count)
}

// upload puts v into b's start as dt and returns that view.
func (g *gpuColl) upload(b gpu.Buffer, dt gpu.DType, v []float64) (gpu.Buffer, error) {
	d := view(b, dt, len(v))
	return d, d.CopyFromHost(encodeAll(dt, v))
}

// expect compares the first len(want) elements of b with want.
func (g *gpuColl) expect(what string, b gpu.Buffer, dt gpu.DType, want []float64) error {
	got := make([]byte, len(want)*dt.Size())
	if err := view(b, dt, len(want)).CopyToHost(got); err != nil {
		return fmt.Errorf("%s: download: %w", what, err)
	}
	g.checked++
	w := encodeAll(dt, want)
	if !bytes.Equal(got, w) {
		i := 0
		for i < len(got) && got[i] == w[i] {
			i++
		}
		e := i / dt.Size()
		g.failures = append(g.failures, fmt.Sprintf("%s: element %d of %d differs (want %v; bytes %x, want %x)",
			what, e, len(want), want[e], got[e*dt.Size():(e+1)*dt.Size()], w[e*dt.Size():(e+1)*dt.Size()]))
	}
	return nil
}

// reduced is the reference reduction of every rank's input, in rank order.
func (g *gpuColl) reduced(count int, dt gpu.DType, op mpi.Op) []float64 {
	n := g.w.Size()
	acc := g.input(0, count, dt, op)
	for r := 1; r < n; r++ {
		x := g.input(r, count, dt, op)
		for i := range acc {
			acc[i] = gpuFold(op, acc[i], x[i])
		}
	}
	return acc
}

// reductions checks AllreduceGPU (out of place and in place), ReduceGPU
// and ReduceScatterBlockGPU for one type, operation and count.
func (g *gpuColl) reductions(dt gpu.DType, op mpi.Op, count int) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	tag := fmt.Sprintf("%v %v count %d", dt, op, count)

	g.call++
	s, err := g.upload(g.send, dt, g.input(me, count, dt, op))
	if err != nil {
		return err
	}
	r := view(g.recv, dt, count)
	if err := mpi.AllreduceGPU(w, s, r, op); err != nil {
		return fmt.Errorf("AllreduceGPU %s: %w", tag, err)
	}
	if err := g.expect("AllreduceGPU "+tag, r, dt, g.reduced(count, dt, op)); err != nil {
		return err
	}

	g.call++
	if r, err = g.upload(g.recv, dt, g.input(me, count, dt, op)); err != nil {
		return err
	}
	if err := mpi.AllreduceGPU(w, gpu.Buffer{}, r, op); err != nil {
		return fmt.Errorf("AllreduceGPU in place %s: %w", tag, err)
	}
	if err := g.expect("AllreduceGPU in place "+tag, r, dt, g.reduced(count, dt, op)); err != nil {
		return err
	}

	g.call++
	root := n - 1
	if s, err = g.upload(g.send, dt, g.input(me, count, dt, op)); err != nil {
		return err
	}
	r = view(g.recv, dt, count)
	if err := mpi.ReduceGPU(w, s, r, op, root); err != nil {
		return fmt.Errorf("ReduceGPU %s: %w", tag, err)
	}
	if me == root {
		if err := g.expect("ReduceGPU "+tag, r, dt, g.reduced(count, dt, op)); err != nil {
			return err
		}
	}

	// In place at a root in the middle (at np 4 on two pretend nodes, not
	// its node's lowest rank).
	g.call++
	root = n / 2
	if me == root {
		if r, err = g.upload(g.recv, dt, g.input(me, count, dt, op)); err != nil {
			return err
		}
		s = gpu.Buffer{}
	} else {
		if s, err = g.upload(g.send, dt, g.input(me, count, dt, op)); err != nil {
			return err
		}
		r = gpu.Buffer{}
	}
	if err := mpi.ReduceGPU(w, s, r, op, root); err != nil {
		return fmt.Errorf("ReduceGPU in place %s: %w", tag, err)
	}
	if me == root {
		if err := g.expect("ReduceGPU in place "+tag, r, dt, g.reduced(count, dt, op)); err != nil {
			return err
		}
	}

	g.call++
	if s, err = g.upload(g.send, dt, g.input(me, n*count, dt, op)); err != nil {
		return err
	}
	r = view(g.recv, dt, count)
	if err := mpi.ReduceScatterBlockGPU(w, s, r, op); err != nil {
		return fmt.Errorf("ReduceScatterBlockGPU %s: %w", tag, err)
	}
	if err := g.expect("ReduceScatterBlockGPU "+tag, r, dt, g.reduced(n*count, dt, op)[me*count:(me+1)*count]); err != nil {
		return err
	}

	// In place: the input in recvbuf, this rank's block left at its start.
	g.call++
	if r, err = g.upload(g.recv, dt, g.input(me, n*count, dt, op)); err != nil {
		return err
	}
	if err := mpi.ReduceScatterBlockGPU(w, gpu.Buffer{}, r, op); err != nil {
		return fmt.Errorf("ReduceScatterBlockGPU in place %s: %w", tag, err)
	}
	return g.expect("ReduceScatterBlockGPU in place "+tag, r, dt, g.reduced(n*count, dt, op)[me*count:(me+1)*count])
}

// movements checks BcastGPU, AllgatherGPU (both forms), GatherGPU,
// ScatterGPU and AlltoallGPU for one type and count.
func (g *gpuColl) movements(dt gpu.DType, count int) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	tag := fmt.Sprintf("%v count %d", dt, count)
	all := func(per int) []float64 { // every rank's input, concatenated
		var v []float64
		for r := range n {
			v = append(v, g.input(r, per, dt, mpi.Sum)...)
		}
		return v
	}

	g.call++
	root := n / 2
	b, err := g.upload(g.recv, dt, g.input(me, count, dt, mpi.Sum))
	if err != nil {
		return err
	}
	if err := mpi.BcastGPU(w, b, root); err != nil {
		return fmt.Errorf("BcastGPU %s: %w", tag, err)
	}
	if err := g.expect("BcastGPU "+tag, b, dt, g.input(root, count, dt, mpi.Sum)); err != nil {
		return err
	}

	g.call++
	s, err := g.upload(g.send, dt, g.input(me, count, dt, mpi.Sum))
	if err != nil {
		return err
	}
	r := view(g.recv, dt, n*count)
	if err := mpi.AllgatherGPU(w, s, r); err != nil {
		return fmt.Errorf("AllgatherGPU %s: %w", tag, err)
	}
	if err := g.expect("AllgatherGPU "+tag, r, dt, all(count)); err != nil {
		return err
	}

	g.call++
	whole := all(count)
	if r, err = g.upload(g.recv, dt, whole); err != nil {
		return err
	}
	// In place: only this rank's block is its own; scribble on the others.
	for p := range n {
		if p != me {
			if err := r.Slice(p*count, (p+1)*count).CopyFromHost(make([]byte, count*dt.Size())); err != nil {
				return err
			}
		}
	}
	if err := mpi.AllgatherGPU(w, gpu.Buffer{}, r); err != nil {
		return fmt.Errorf("AllgatherGPU in place %s: %w", tag, err)
	}
	if err := g.expect("AllgatherGPU in place "+tag, r, dt, whole); err != nil {
		return err
	}

	g.call++
	root = 0
	if s, err = g.upload(g.send, dt, g.input(me, count, dt, mpi.Sum)); err != nil {
		return err
	}
	r = view(g.recv, dt, n*count)
	if err := mpi.GatherGPU(w, s, r, root); err != nil {
		return fmt.Errorf("GatherGPU %s: %w", tag, err)
	}
	if me == root {
		if err := g.expect("GatherGPU "+tag, r, dt, all(count)); err != nil {
			return err
		}
	}

	g.call++
	root = n - 1
	if s, err = g.upload(g.send, dt, g.input(root, n*count, dt, mpi.Sum)); err != nil {
		return err
	}
	r = view(g.recv, dt, count)
	if err := mpi.ScatterGPU(w, s, r, root); err != nil {
		return fmt.Errorf("ScatterGPU %s: %w", tag, err)
	}
	if err := g.expect("ScatterGPU "+tag, r, dt, g.input(root, n*count, dt, mpi.Sum)[me*count:(me+1)*count]); err != nil {
		return err
	}

	g.call++
	if s, err = g.upload(g.send, dt, g.input(me, n*count, dt, mpi.Sum)); err != nil {
		return err
	}
	r = view(g.recv, dt, n*count)
	if err := mpi.AlltoallGPU(w, s, r); err != nil {
		return fmt.Errorf("AlltoallGPU %s: %w", tag, err)
	}
	var want []float64
	for p := range n {
		want = append(want, g.input(p, n*count, dt, mpi.Sum)[me*count:(me+1)*count]...)
	}
	return g.expect("AlltoallGPU "+tag, r, dt, want)
}

// caseGPUColl: every GPU collective, every element type and operation,
// several counts (one element, odd ones, one beyond the pipelined pieces),
// against the reference, then the errors. Without a GPU, the calls fail
// with ErrBuffer on every rank and the job goes on.
func caseGPUColl(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if !gpuUsable() {
		b := gpu.Wrap(0, 0xdead0000, gpu.Float32, 16)
		if err := mpi.AllreduceGPU(w, b, b, mpi.Sum); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("AllreduceGPU without a GPU: %v, want ErrBuffer", err)
		}
		if err := mpi.BcastGPU(w, b, 0); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("BcastGPU without a GPU: %v, want ErrBuffer", err)
		}
		x := []int{me}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
			return fmt.Errorf("host Allreduce after the GPU errors: %v, %d", err, x[0])
		}
		return nil
	}
	g, err := newGPUColl(w)
	if err != nil {
		return err
	}
	seed := []uint64{uint64(time.Now().UnixNano())}
	if err := mpi.Bcast(w, seed, 0); err != nil {
		return err
	}
	g.seed = seed[0]
	const big = 3<<20 + 5 // float32: 12 MiB, beyond the IPC slots; many pieces with GORUN_COLL_GPU_CHUNK
	free, err := g.buffers(gpu.Uint8, n*big*8)
	if err != nil {
		return err
	}
	defer free()

	for _, dt := range gpu.DTypes {
		for _, op := range []mpi.Op{mpi.Sum, mpi.Prod, mpi.Min, mpi.Max} {
			// 12*4099: with the two-shot allreduce forced, its 16-byte
			// blocks take all of it in 4- and 8-byte types at 3 ranks
			// (two launches); the other counts and types leave a rest
			// to its third launch (the one-shot push), and 1 and 7 are
			// under its 16 bytes a rank (the one-shot push alone).
			for _, count := range []int{1, 7, 4099, 12 * 4099, 70001} {
				if err := g.reductions(dt, op, count); err != nil {
					return err
				}
			}
		}
		for _, count := range []int{1, 4099, 70001} {
			if err := g.movements(dt, count); err != nil {
				return err
			}
		}
	}
	for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64} {
		if err := g.reductions(dt, mpi.Sum, big); err != nil {
			return err
		}
	}
	// 12 MiB of float32 in blocks that 2, 3, 4 and 6 ranks divide: the
	// two-shot allreduce's largest at three and four ranks.
	if err := g.reductions(gpu.Float32, mpi.Sum, big-5); err != nil {
		return err
	}
	if err := g.movements(gpu.Float32, big); err != nil {
		return err
	}
	if err := gpuCollErrors(w, g); err != nil {
		return err
	}
	if err := gpuCollLate(w, g); err != nil {
		return err
	}
	if len(g.failures) > 0 {
		return fmt.Errorf("rank %d (seed %d): %d of %d results wrong:\n%s", me, g.seed, len(g.failures), g.checked, joinLines(g.failures, 10))
	}
	fmt.Printf("rank %d: %d GPU collective results exact (seed %d)\n", me, g.checked, g.seed)
	return nil
}

// gpuCollErrors: wrong arguments give their class on the rank that passed
// them and abort the call on every rank; the next call works.
func gpuCollErrors(w *mpi.Comm, g *gpuColl) error {
	me := w.Rank()
	s, r := view(g.send, gpu.Float32, 16), view(g.recv, gpu.Float32, 16)
	want := func(what string, err error, cl mpi.Class) error {
		if me == 0 && !errors.Is(err, cl) {
			return fmt.Errorf("%s: %v, want %v", what, err, cl)
		}
		if me != 0 && err == nil {
			return fmt.Errorf("%s: the other ranks' calls succeeded", what)
		}
		return nil
	}
	op := mpi.Sum
	if me == 0 {
		op = mpi.Band
	}
	if err := want("AllreduceGPU with Band", mpi.AllreduceGPU(w, s, r, op), mpi.ErrOp); err != nil {
		return err
	}
	rr := r
	if me == 0 {
		rr = view(g.recv, gpu.Int32, 16)
	}
	if err := want("AllreduceGPU with mixed types", mpi.AllreduceGPU(w, s, rr, mpi.Sum), mpi.ErrType); err != nil {
		return err
	}
	if me == 0 {
		rr = view(g.recv, gpu.Float32, 8)
	}
	if err := want("AllreduceGPU into a short buffer", mpi.AllreduceGPU(w, s, rr, mpi.Sum), mpi.ErrCount); err != nil {
		return err
	}
	if me == 0 {
		rr = gpu.Wrap(g.send.Device(), g.send.Ptr()+8, gpu.Float32, 16)
	}
	if err := want("AllreduceGPU with overlapping buffers", mpi.AllreduceGPU(w, s, rr, mpi.Sum), mpi.ErrBuffer); err != nil {
		return err
	}
	// In place, the receive buffer must split into size equal blocks.
	if err := mpi.AlltoallGPU(w, gpu.Buffer{}, view(g.recv, gpu.Float32, 4*w.Size()+1)); !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("AlltoallGPU in place on %d elements: %v, want ErrCount", 4*w.Size()+1, err)
	}
	if _, err := g.upload(g.send, gpu.Float32, []float64{1}); err != nil {
		return err
	}
	one := view(g.recv, gpu.Float32, 1)
	if err := mpi.AllreduceGPU(w, view(g.send, gpu.Float32, 1), one, mpi.Sum); err != nil {
		return fmt.Errorf("AllreduceGPU after the errors: %w", err)
	}
	return g.expect("AllreduceGPU after the errors", one, gpu.Float32, []float64{float64(w.Size())})
}

// gpuCollLate: a rank that comes to a call late (by several of the push
// kernels' waits, coll's pushSlice) holds the others up but fails nobody:
// their kernels give up waiting and are launched again. Each collective
// twice, the last rank late and then rank 0 (Bcast's root, then a
// non-root).
func gpuCollLate(w *mpi.Comm, g *gpuColl) error {
	me, n := w.Rank(), w.Size()
	const lateBy = 30 * time.Millisecond
	one := view(g.recv, gpu.Float32, 1)
	for i, late := range []int{n - 1, 0} {
		if _, err := g.upload(g.send, gpu.Float32, []float64{float64(me + i)}); err != nil {
			return err
		}
		if me == late {
			time.Sleep(lateBy)
		}
		if err := mpi.AllreduceGPU(w, view(g.send, gpu.Float32, 1), one, mpi.Sum); err != nil {
			return fmt.Errorf("AllreduceGPU with rank %d late: %w", late, err)
		}
		if err := g.expect(fmt.Sprintf("AllreduceGPU with rank %d late", late), one, gpu.Float32,
			[]float64{float64(n*(n-1)/2 + n*i)}); err != nil {
			return err
		}
		// A hundred elements: where the two-shot allreduce is forced, its
		// three launches at 2, 3 and 4 ranks (16-byte blocks of 384 bytes
		// in all, then 16 bytes), the first of which waits.
		in, want := make([]float64, 100), make([]float64, 100)
		for k := range in {
			in[k], want[k] = float64(me+i+k), float64(n*(n-1)/2+n*(i+k))
		}
		if _, err := g.upload(g.send, gpu.Float32, in); err != nil {
			return err
		}
		if me == late {
			time.Sleep(lateBy)
		}
		hundred := view(g.recv, gpu.Float32, 100)
		if err := mpi.AllreduceGPU(w, view(g.send, gpu.Float32, 100), hundred, mpi.Sum); err != nil {
			return fmt.Errorf("AllreduceGPU of 100 with rank %d late: %w", late, err)
		}
		if err := g.expect(fmt.Sprintf("AllreduceGPU of 100 with rank %d late", late), hundred, gpu.Float32, want); err != nil {
			return err
		}
		if me == 0 {
			if _, err := g.upload(g.recv, gpu.Float32, []float64{float64(100 + i)}); err != nil {
				return err
			}
		}
		if me == late {
			time.Sleep(lateBy)
		}
		if err := mpi.BcastGPU(w, one, 0); err != nil {
			return fmt.Errorf("BcastGPU with rank %d late: %w", late, err)
		}
		if err := g.expect(fmt.Sprintf("BcastGPU with rank %d late", late), one, gpu.Float32,
			[]float64{float64(100 + i)}); err != nil {
			return err
		}
	}
	return nil
}

func joinLines(s []string, most int) string {
	var b bytes.Buffer
	for i, l := range s {
		if i == most {
			fmt.Fprintf(&b, "... and %d more\n", len(s)-most)
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// TestGPUCollectives runs every GPU collective against its reference on
// the GPUs there are (the lent GPU hosts run it; see docs/gpu.md): two
// ranks on their own GPUs with the table's choice (the IPC regions up to
// their slot size) and with each p2p algorithm forced, on two pretend
// hosts, three and four ranks (sharing GPUs when there are fewer), two on
// one GPU, and through the staging pipeline over TCP as between hosts. Without a GPU it checks that the
// calls fail cleanly.
func TestGPUCollectives(t *testing.T) {
	if ok, _ := gpu.Available(); !ok {
		job{np: 2, cas: "gpu-coll"}.ok(t)
		return
	}
	force := func(alg, ag, bc string) []string {
		return []string{"GORUN_COLL_GPU_ALLREDUCE=" + alg, "GORUN_COLL_GPU_REDUCE_SCATTER_BLOCK=" + alg,
			"GORUN_COLL_GPU_ALLGATHER=" + ag, "GORUN_COLL_GPU_BCAST=" + bc}
	}
	p2p := append(force("oneshot", "direct", "binomial"), "GORUN_COLL_GPU_CHUNK=1048576")
	ring := append(force("ring", "ring", "binomial"), "GORUN_COLL_GPU_REDUCE=ring")
	// The ring reduce-scatter's steps in pieces of 4 KiB (16 a block at
	// the largest count): pieces folded and sent on while others arrive.
	ringPieces := append(ring, "GORUN_COLL_GPU_RING_PIECE=4096")
	t.Run("np2", func(t *testing.T) { job{np: 2, cas: "gpu-coll"}.ok(t) })
	t.Run("np2-p2p", func(t *testing.T) { job{np: 2, cas: "gpu-coll", env: p2p}.ok(t) })
	t.Run("np2-ring", func(t *testing.T) { job{np: 2, cas: "gpu-coll", env: ring}.ok(t) })
	// Two pretend hosts: the IPC algorithms fall back to p2p.
	t.Run("np2-two-nodes", func(t *testing.T) { job{np: 2, cas: "gpu-coll", env: []string{"GORUN_COLL_FAKE_NODES=2"}}.ok(t) })
	// The hierarchical algorithms (gpuhier.go): two pretend nodes with
	// CUDA IPC between all ranks, and two pretend hosts (GORUN_FAKE_HOSTS)
	// with the staging pipeline over TCP between them; at np 3 one node
	// has a single rank.
	t.Run("np4-two-nodes", func(t *testing.T) { job{np: 4, cas: "gpu-coll", env: []string{"GORUN_COLL_FAKE_NODES=2"}}.ok(t) })
	t.Run("np4-two-hosts", func(t *testing.T) { job{np: 4, cas: "gpu-coll", env: []string{"GORUN_FAKE_HOSTS=2"}}.ok(t) })
	t.Run("np3-two-hosts", func(t *testing.T) { job{np: 3, cas: "gpu-coll", env: []string{"GORUN_FAKE_HOSTS=2"}}.ok(t) })
	// The allreduce, allgather and reduce-scatter by rails (each node's
	// ranks, then the ranks of equal index across the nodes) at every size.
	// Three ranks a node (each pair of a node exchanges m messages), and
	// rails of three nodes (the rail's allgatherv and reduce-scatter then
	// take their ring from 256 KiB): not yet run on a GPU (added after the
	// session's device time was spent).
	rails := []string{"GORUN_COLL_GPU_HIER_RAIL=1", "GORUN_COLL_GPU_HIER_RAIL_ALLGATHER=1", "GORUN_COLL_GPU_HIER_RAIL_REDUCE_SCATTER=1"}
	t.Run("np6-two-hosts-rails", func(t *testing.T) {
		job{np: 6, cas: "gpu-coll", env: append([]string{"GORUN_FAKE_HOSTS=2"}, rails...)}.ok(t)
	})
	t.Run("np6-three-hosts-rails", func(t *testing.T) {
		job{np: 6, cas: "gpu-coll", env: append([]string{"GORUN_FAKE_HOSTS=3"}, rails...)}.ok(t)
	})
	t.Run("np4-two-hosts-rails", func(t *testing.T) {
		job{np: 4, cas: "gpu-coll", env: []string{"GORUN_FAKE_HOSTS=2", "GORUN_COLL_GPU_HIER_RAIL=1",
			"GORUN_COLL_GPU_HIER_RAIL_ALLGATHER=1", "GORUN_COLL_GPU_HIER_RAIL_REDUCE_SCATTER=1"}}.ok(t)
	})
	// The push kernels (one launch: push, flags, fold or copy out; Reduce
	// and Bcast one-way, to or from the root), on two GPUs and with ranks
	// sharing one, and the copy-engine ipc algorithms they replaced in the
	// table (their fallback where a rank cannot run the kernels).
	// The report (GORUN_COLL_REPORT) shows that the forced kernels ran.
	push := append(force("push", "push", "push"), "GORUN_COLL_GPU_REDUCE=push", "GORUN_COLL_REPORT=1")
	pushAlgs := []string{"gpu_allreduce/push", "gpu_reduce_scatter_block/push", "gpu_allgather/push", "gpu_bcast/push", "gpu_reduce/push"}
	pushKinds := []string{"allreduce", "reduce-scatter", "allgather", "bcast", "reduce"}
	ipc := force("ipc", "ipc", "ipc")
	for _, np := range []int{2, 3} {
		t.Run(fmt.Sprintf("np%d-push", np), func(t *testing.T) {
			checkRan(t, job{np: np, cas: "gpu-coll", env: push}.ok(t), np, pushAlgs, pushKinds)
		})
	}
	t.Run("np2-ipc", func(t *testing.T) { job{np: 2, cas: "gpu-coll", env: ipc}.ok(t) })
	t.Run("np3-ipc", func(t *testing.T) { job{np: 3, cas: "gpu-coll", env: ipc}.ok(t) })
	t.Run("np3", func(t *testing.T) { job{np: 3, cas: "gpu-coll"}.ok(t) })
	t.Run("np4", func(t *testing.T) { job{np: 4, cas: "gpu-coll"}.ok(t) })
	t.Run("np4-ring", func(t *testing.T) { job{np: 4, cas: "gpu-coll", env: ringPieces}.ok(t) })
	// The two-shot allreduce (reduce-scatter push, then allgather push,
	// then the one-shot push of what their 16-byte blocks leave) forced at
	// every size: counts that the ranks divide in 16-byte blocks and
	// others, ones under 16n bytes (the one-shot push alone), and big in
	// float64 (blocks beyond a slot: the ring).
	twoshot := []string{"GORUN_COLL_GPU_ALLREDUCE=twoshot", "GORUN_COLL_REPORT=1"}
	for _, np := range []int{3, 4} {
		t.Run(fmt.Sprintf("np%d-twoshot", np), func(t *testing.T) {
			checkRan(t, job{np: np, cas: "gpu-coll", env: twoshot}.ok(t), np, []string{"gpu_allreduce/twoshot"},
				[]string{"allreduce (reduce-scatter)", "allreduce (allgather)", "allreduce (the last elements)"})
		})
	}
	t.Run("np3-ring", func(t *testing.T) { job{np: 3, cas: "gpu-coll", env: ringPieces}.ok(t) })
	// The pipelined broadcast chain (gpupipe.go) forced at every size, in
	// segments of 64 KiB.
	pipe := []string{"GORUN_COLL_GPU_BCAST=pipe", "GORUN_COLL_SEGSIZE=65536"}
	t.Run("np4-pipe", func(t *testing.T) { job{np: 4, cas: "gpu-coll", env: pipe}.ok(t) })
	t.Run("np3-pipe", func(t *testing.T) { job{np: 3, cas: "gpu-coll", env: pipe}.ok(t) })
	t.Run("same-gpu", func(t *testing.T) { job{np: 2, cas: "gpu-coll", env: []string{"GORUN_TEST_GPU_SAME=1"}}.ok(t) })
	t.Run("staged-tcp", func(t *testing.T) {
		job{np: 2, cas: "gpu-coll", env: append(p2p, "GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda")}.ok(t)
	})
}
