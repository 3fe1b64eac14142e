package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestGPUServe runs push calls on the devices' resident kernels (Server)
// among up to two GPUs of this process, one goroutine a GPU: allreduce,
// allgather and bcast of 4 B to 1 MiB back to back; calls after a pause
// longer than the kernels' idle time (each kernel must end, and the next
// call launches it again, through the race of kernels/reduce.cu's Dekker
// protocol); HoldServer between two calls, and around one (which is then
// launched); a GPU whose calls are
// launched beside one whose calls are served; kernels of a 2-block grid
// (fewer blocks than a call's, as on a device that holds fewer than
// kernels.AllreducePushMaxBlocks at once), which take a call's 8 blocks in
// turn; a GPU 10 ms late with 2 ms
// timeouts (the served call gives up, is handed over again and resumes);
// then every operation and element type of allreduce, and reduce-scatter
// and reduce, served, against the CPU's fold; then kernels of one block
// more than the device holds at once (serveUnresident). Every result is checked
// against values the host computes, fresh for every call; at the end both
// kernels must have ended by themselves. Every call must have been
// handed to the kernel (served) or not (launched) as its step says.
func TestGPUServe(t *testing.T) {
	n := requireGPU(t, 1)
	ranks := min(n, 2)
	for d := range ranks {
		must(t, LoadKernels(d))
	}
	const idle = 200 * time.Microsecond
	srv := make([]*Server, ranks)
	for d := range ranks {
		v, err := ServerFor(d, idle)
		must(t, err)
		if v == nil {
			t.Skip("the loaded kernels have no resident kernel (gorun_serve)")
		}
		srv[d] = v
		t.Logf("device %d: resident kernel of %d blocks", d, v.blocks)
	}
	g := newFloorGroup(t, ranks)
	defer g.free()
	type step struct {
		coll   string
		size   int // bytes a rank
		served []bool
		pause  time.Duration // before the call
		late   time.Duration // the last rank's delay
		stop   bool          // HoldServer after the call
		hold   bool          // the call made while HoldServer holds the devices: launched
		grid   int           // the kernels' grid for this call (0: as made)
	}
	all, mixed := []bool{true, true}, []bool{true, false}
	var steps []step
	for _, coll := range []string{"allreduce", "allgather", "bcast"} {
		for _, size := range []int{4, 1000, 64 << 10, 1 << 20} {
			steps = append(steps, step{coll: coll, size: size, served: all})
		}
		steps = append(steps, step{coll: coll, size: 8, served: all, pause: 2 * time.Millisecond},
			step{coll: coll, size: 8, served: all, pause: 2 * time.Millisecond},
			step{coll: coll, size: 64, served: all, stop: true}, step{coll: coll, size: 64, served: all},
			step{coll: coll, size: 64 << 10, served: all, hold: true},
			step{coll: coll, size: 8 << 10, served: all, grid: 2}, step{coll: coll, size: 64 << 10, served: all, grid: 2})
		if ranks == 2 {
			steps = append(steps, step{coll: coll, size: 4096, served: mixed}, step{coll: coll, size: 4096, served: []bool{false, true}},
				step{coll: coll, size: 256 << 10, served: all, late: 10 * time.Millisecond})
		}
	}
	for i, st := range steps {
		name := fmt.Sprintf("step %d (%s of %d B, served %v, pause %v, late %v)", i, st.coll, st.size, st.served[:ranks], st.pause, st.late)
		root := ranks - 1
		m := st.size / 4
		value := func(d, k int) float32 { return float32((i*131+d*17+k)%977 + 1) }
		for d := range ranks {
			in := valuesOf(d, m, value)
			must(t, Upload(g.in[d].Slice(0, m), in))
			must(t, g.out[d].CopyFromHost(make([]byte, ranks*st.size)))
			if st.coll == "bcast" && d == root {
				must(t, Upload(g.out[d].Slice(0, m), in))
			}
		}
		timeout := time.Second
		if st.late > 0 {
			timeout = 2 * time.Millisecond
		}
		grids := make([]int, ranks)
		if st.grid > 0 {
			for d := range ranks {
				grids[d] = setGrid(srv[d], st.grid)
			}
		}
		var releases []func()
		if st.hold {
			for d := range ranks {
				releases = append(releases, HoldServer(d))
			}
		}
		// After the holds, whose quit calls count as calls handed over.
		gens, seqs := make([]uint64, ranks), make([]uint64, ranks)
		for d := range ranks {
			gens[d], seqs[d] = srv[d].gen, srv[d].seq
		}
		gaveUp := g.serveCall(t, name, srv, st.served, timeout, st.pause, st.late, func(d int, reg PushRegion, pc PushCall) error {
			if st.hold && srv[d].running.Load() {
				return fmt.Errorf("the resident kernel runs while held")
			}
			var err error
			switch st.coll {
			case "allreduce":
				err = AllreducePush(g.streams[d], Sum, reg, pc, g.in[d].Slice(0, m), g.out[d].Slice(0, m))
			case "allgather":
				err = AllgatherPush(g.streams[d], reg, pc, asBytes(g.in[d].Slice(0, m)), asBytes(g.out[d].Slice(0, ranks*m)))
			case "bcast":
				err = BcastPush(g.streams[d], reg, pc, root, asBytes(g.out[d].Slice(0, m)))
			}
			if err == nil && st.stop {
				err = stopped(srv[d])
			}
			return err
		})
		for _, release := range releases {
			release()
		}
		if st.grid > 0 {
			for d := range ranks {
				setGrid(srv[d], grids[d])
			}
		}
		if st.hold {
			for d := range ranks {
				if srv[d].running.Load() {
					t.Errorf("%s: device %d: a call made while held ran on the resident kernel", name, d)
				}
			}
		}
		if st.late > 0 && st.served[0] && gaveUp[0] == 0 {
			t.Errorf("%s: device 0 never gave up waiting for the late device", name)
		}
		for d := range ranks {
			if got, want := srv[d].seq > seqs[d], st.served[d] && !st.hold; got != want {
				t.Errorf("%s: device %d: handed to the resident kernel: %v, want %v", name, d, got, want)
			}
			if !srv[d].offUntil.IsZero() {
				// (another process's kernels holding SMs for 2 ms would
				// do it too: the test wants the GPUs to itself)
				t.Errorf("%s: device %d: a launch of the resident kernel gave up: its grid did not all start", name, d)
			}
			if st.pause > 0 && st.served[d] && srv[d].gen == gens[d] {
				t.Errorf("%s: device %d: the resident kernel was not launched again after the pause", name, d)
			}
			var want []float32
			switch st.coll {
			case "allreduce":
				want = sumsOf(ranks, m, value)
			case "allgather":
				for p := range ranks {
					want = append(want, valuesOf(p, m, value)...)
				}
			case "bcast":
				want = valuesOf(root, m, value)
			}
			g.expectOut(t, name, d, want)
		}
	}
	serveEveryKind(t, g, srv)
	serveUnresident(t, g, srv)
	// Each kernel must end by itself (after idle; a second is room for a
	// loaded machine, not a measure).
	for d, v := range srv {
		deadline := time.Now().Add(time.Second)
		for {
			done, err := v.s.Done()
			must(t, err)
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("device %d: the resident kernel still runs a second after the last call (idle %v)", d, idle)
				break
			}
			time.Sleep(idle)
		}
	}
}

// serveEveryKind runs, served, an allreduce of every operation and
// element type (999 elements: the kernels' element-wise tail, and 4096),
// a reduce-scatter and a reduce (root: the last rank) of two of them,
// each against the fold in rank order of random inputs on the CPU.
func serveEveryKind(t *testing.T, g *floorGroup, srv []*Server) {
	ranks := g.ranks
	seed := uint64(time.Now().UnixNano())
	t.Logf("every kind: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	served := []bool{true, true}
	type call struct {
		kind  string
		op    Op
		dt    DType
		count int // elements a rank's result
	}
	var calls []call
	for _, dt := range DTypes {
		for _, op := range Ops {
			for _, count := range []int{999, 4096} {
				calls = append(calls, call{"allreduce", op, dt, count})
			}
		}
	}
	calls = append(calls, call{"reduce-scatter", Sum, Float32, 999}, call{"reduce-scatter", Max, Int64, 4096},
		call{"reduce", Prod, Float64, 999}, call{"reduce", Min, BFloat16, 4096})
	for _, c := range calls {
		name := fmt.Sprintf("%s %v %v of %d", c.kind, c.op, c.dt, c.count)
		es := c.dt.Size()
		blocks := 1 // blocks of count elements a rank's input holds
		if c.kind == "reduce-scatter" {
			blocks = ranks
		}
		ins := make([][]byte, ranks)
		for d := range ranks {
			ins[d] = randomElements(rng, c.dt, blocks*c.count)
			must(t, g.in[d].CopyFromHost(ins[d]))
			must(t, g.out[d].CopyFromHost(bytes.Repeat([]byte{0xa5}, c.count*es)))
		}
		typed := func(b Buffer, count int) Buffer { return Wrap(b.dev, b.ptr, c.dt, count) }
		root := ranks - 1
		g.serveCall(t, name, srv, served, time.Second, 0, 0, func(d int, reg PushRegion, pc PushCall) error {
			in, out := typed(g.in[d], blocks*c.count), typed(g.out[d], c.count)
			switch c.kind {
			case "allreduce":
				return AllreducePush(g.streams[d], c.op, reg, pc, in, out)
			case "reduce-scatter":
				return ReduceScatterPush(g.streams[d], c.op, reg, pc, in, out)
			}
			return ReducePush(g.streams[d], c.op, reg, pc, root, in, out)
		})
		for d := range ranks {
			if c.kind == "reduce" && d != root {
				continue
			}
			blk := 0
			if c.kind == "reduce-scatter" {
				blk = d
			}
			part := func(p int) []byte { return ins[p][blk*c.count*es : (blk+1)*c.count*es] }
			want := part(0)
			for p := 1; p < ranks; p++ {
				want = refReduce(c.op, c.dt, want, part(p))
			}
			got := make([]byte, c.count*es)
			must(t, g.out[d].CopyToHost(got))
			if !bytes.Equal(got, want) {
				k := 0
				for bytes.Equal(got[k*es:(k+1)*es], want[k*es:(k+1)*es]) {
					k++
				}
				t.Fatalf("%s: device %d: element %d is % x, want % x", name, d, k, got[k*es:(k+1)*es], want[k*es:(k+1)*es])
			}
		}
	}
}

// serveCall runs one push call (call, for device d with its region) on
// every GPU of g at once, one goroutine each, served where served says,
// with the regions' timeout, after pause, the last GPU late by late;
// a call that gave up waiting is handed over again. It returns how often
// each GPU's gave up.
func (g *floorGroup) serveCall(t *testing.T, name string, srv []*Server, served []bool, timeout, pause, late time.Duration,
	call func(d int, reg PushRegion, pc PushCall) error) []int {
	t.Helper()
	ranks := g.ranks
	pc := g.next()
	errs := make([]error, ranks)
	gaveUp := make([]int, ranks)
	inLockstep(ranks, func(d int, bar *spinBarrier) {
		reg := g.reg[d]
		reg.Timeout = timeout
		if served[d] {
			reg.Server = srv[d]
		}
		bar.wait()
		time.Sleep(pause)
		if d == ranks-1 {
			time.Sleep(late)
		}
		for {
			if err := call(d, reg, pc); err != nil {
				errs[d] = err
				return
			}
			again, err := g.words[d].Wait(g.streams[d], pc.Seq, time.Millisecond)
			if err != nil || !again {
				errs[d] = err
				return
			}
			if gaveUp[d]++; gaveUp[d] > 100 {
				errs[d] = fmt.Errorf("gave up waiting %d times", gaveUp[d])
				return
			}
		}
	})
	for d, err := range errs {
		if err != nil {
			t.Fatalf("%s: device %d: %v", name, d, err)
		}
	}
	return gaveUp
}

// stopped stops v's kernel and checks that it has ended.
func stopped(v *Server) error {
	release := HoldServer(v.dev)
	defer release()
	done, err := v.s.Done()
	if err == nil && (!done || v.running.Load()) {
		err = fmt.Errorf("device %d: the resident kernel still runs after HoldServer", v.dev)
	}
	return err
}

// serveUnresident gives the kernels one block more than their devices
// hold at once, as where other kernels hold SMs for good: the launch must
// give up (its block 0 cannot see the whole grid start) and take no call,
// which the host launches instead, and so the next call, without handing
// it over, until offUntil; then the grid is put back and the next call
// served. Every result is checked; a kernel that waited for its last
// block would hang the test.
func serveUnresident(t *testing.T, g *floorGroup, srv []*Server) {
	ranks := g.ranks
	const m = 1024
	served := []bool{true, true}
	grids := make([]int, ranks)
	for d, v := range srv {
		most, err := residentBlocks(v.s.Context(), v.f)
		must(t, err)
		grids[d] = setGrid(v, most+1)
		v.mu.Lock()
		v.offFor = time.Hour
		v.mu.Unlock()
	}
	for i, st := range []struct {
		name        string
		handed, off bool // after the call
	}{
		{"unresident grid, given up", true, true},
		{"unresident grid, launched while off", false, true},
		{"grid put back", true, false},
	} {
		if i == 2 {
			for d, v := range srv {
				setGrid(v, grids[d])
				v.mu.Lock()
				v.offUntil, v.offFor = time.Time{}, serveOffFor
				v.mu.Unlock()
			}
		}
		value := func(d, k int) float32 { return float32(i*7 + d*3 + k%11) }
		seqs := make([]uint64, ranks)
		for d := range ranks {
			must(t, Upload(g.in[d].Slice(0, m), valuesOf(d, m, value)))
			must(t, g.out[d].CopyFromHost(bytes.Repeat([]byte{0xa5}, 4*m)))
			seqs[d] = srv[d].seq
		}
		g.serveCall(t, st.name, srv, served, time.Second, 0, 0, func(d int, reg PushRegion, pc PushCall) error {
			return AllreducePush(g.streams[d], Sum, reg, pc, g.in[d].Slice(0, m), g.out[d].Slice(0, m))
		})
		for d, v := range srv {
			g.expectOut(t, st.name, d, sumsOf(ranks, m, value))
			if off := !v.offUntil.IsZero(); off != st.off {
				t.Errorf("%s: device %d: launches given up (off until %v): %v, want %v (grid of %d blocks)", st.name, d, v.offUntil, off, st.off, v.blocks)
			}
			if handed := v.seq > seqs[d]; handed != st.handed {
				t.Errorf("%s: device %d: handed to the resident kernel: %v, want %v", st.name, d, handed, st.handed)
			}
		}
	}
}

// valuesOf is device d's m inputs, value(d, k) for k < m.
func valuesOf(d, m int, value func(d, k int) float32) []float32 {
	in := make([]float32, m)
	for k := range in {
		in[k] = value(d, k)
	}
	return in
}

// sumsOf is the allreduce of the m inputs of ranks devices (valuesOf),
// folded in rank order.
func sumsOf(ranks, m int, value func(d, k int) float32) []float32 {
	want := make([]float32, m)
	for k := range want {
		for p := range ranks {
			want[k] += value(p, k)
		}
	}
	return want
}

// expectOut fails t at the first of device d's outputs that is not want's.
func (g *floorGroup) expectOut(t testing.TB, name string, d int, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	must(t, Download(got, g.out[d].Slice(0, len(want))))
	for k := range got {
		if got[k] != want[k] {
			t.Fatalf("%s: device %d: element %d of %d is %v, want %v", name, d, k, len(got), got[k], want[k])
		}
	}
}

// setGrid ends v's kernel and sets the grid of its next launch to blocks;
// it returns the grid it had.
func setGrid(v *Server, blocks int) int {
	release := HoldServer(v.dev)
	defer release()
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.blocks
	v.blocks = blocks
	return old
}

// asBytes is b as bytes (the allgather and bcast kernels move bytes).
func asBytes(b Buffer) Buffer { return Wrap(b.dev, b.ptr, Uint8, b.bytes) }
