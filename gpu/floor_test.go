package gpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu/cuda"
)

// BenchmarkGPUFloor times the pieces of a push collective's per-call
// floor (coll/MEASUREMENTS.md, GPU collectives, "Where a push call's
// time goes"), each alone, in one process:
//
//   - launch: cuLaunchKernel of an empty kernel (a reduce of 0 elements),
//     back to back (the host's cost of a launch);
//   - launch+sync: the same, each followed by cuStreamSynchronize;
//   - sync-idle: cuStreamSynchronize of an idle stream (cuStreamQuery's
//     is gpu/cuda's BenchmarkDriverCalls/query-idle);
//   - launch+poll: a kernel whose one thread sets a word of mapped host
//     memory (testdata/probe.cu), the host spinning on the word;
//     launch+poll+sync adds the stream's synchronization after the word
//     came;
//   - pingpong (2 GPUs): a flag bounced between two GPUs' kernels over
//     NVLink, ns per one-way trip;
//   - fence/<kind>/<where>/<bytes>: a block's stores into its own or the
//     peer's memory, then a barrier, fences of one kind (testdata/probe.cu)
//     and a barrier (fence-ns);
//   - push/ranks=1 and push/ranks=2: AllreducePush of float32 over
//     regions of one GPU, or of two GPUs by peer access (two goroutines,
//     one per GPU, lined up before every call by a spin barrier, as the
//     OSU loop's barrier lines the ranks up), waited for by
//     synchronizing the stream (wait=sync) or by polling the completion
//     word (wait=poll), or on the devices' resident kernels
//     (wait=serve); ns/call is the slower goroutine's average;
//   - push/.../wait=poll+compute and serve+compute: each 8-byte call
//     followed by a reduce of 32 MiB float32 (memory-bound) on another
//     stream of each device, a program's own kernel, which wants every
//     SM; +fma the same with testdata/probe.cu's probe_fma (compute-bound:
//     one wave of 2048 threads an SM, or GORUN_GPU_FLOOR_FMA_WAVES waves,
//     4x1000 FMAs each); compute-ns is its time, launch to its stream's
//     synchronization: with serve, the resident kernel, waiting for the
//     next call, holds its grid's blocks meanwhile (a grid of
//     GORUN_GPU_FLOOR_SERVE_GRID blocks where set, for the measurement;
//     bench/results/gpu-serve-neighbor-2026-11-27-h200x2.txt).
//
// The probe kernels come from GORUN_GPU_PROBE_PTX (default
// testdata/probe.ptx); without them those parts are skipped.
// GORUN_GPU_FLOOR_SCHED=auto|spin|yield|blocking sets the primary
// contexts' scheduling flags first (run it alone: -test.run '^$').
func BenchmarkGPUFloor(b *testing.B) {
	floorSched(b)
	requireGPU(b, 1)
	must(b, LoadKernels(0))
	ctx, err := DeviceContext(0)
	must(b, err)
	flags, _, err := cuda.PrimaryContextState(0)
	must(b, err)
	b.Logf("device 0 primary context flags: %v", flags)
	s, err := ctx.NewStream()
	must(b, err)
	defer s.Destroy()
	ks, err := kernelsFor(ctx)
	must(b, err)
	empty := ks.fns[[2]uint8{uint8(Sum), uint8(Float32)}]
	var ka cuda.KernelArgs
	launchEmpty := func() {
		ka.Reset()
		for range 4 {
			ka.U64(0) // dst, a, b, n = 0: nothing to do
		}
		must(b, s.LaunchArgs(empty, cuda.D1(1), cuda.D1(reduceThreads), 0, &ka))
	}
	b.Run("launch", func(b *testing.B) {
		for i := range b.N {
			launchEmpty()
			if i%256 == 255 {
				b.StopTimer()
				must(b, s.Synchronize())
				b.StartTimer()
			}
		}
		b.StopTimer()
		must(b, s.Synchronize())
	})
	b.Run("launch+sync", func(b *testing.B) {
		for range b.N {
			launchEmpty()
			must(b, s.Synchronize())
		}
	})
	b.Run("sync-idle", func(b *testing.B) {
		for range b.N {
			must(b, s.Synchronize())
		}
	})
	if probe := loadProbe(b, ctx); probe != nil {
		signal, err := probe.Function("probe_signal")
		must(b, err)
		w, err := NewPushWords(0)
		must(b, err)
		defer w.Free()
		v := uint64(0)
		for _, then := range []string{"", "+sync"} {
			b.Run("launch+poll"+then, func(b *testing.B) {
				for range b.N {
					v++
					ka.Reset()
					ka.U64(uint64(w.Done()))
					ka.U64(v)
					must(b, s.LaunchArgs(signal, cuda.D1(1), cuda.D1(32), 0, &ka))
					for w.done.Load() != v {
					}
					if then != "" {
						must(b, s.Synchronize())
					}
				}
				b.StopTimer()
				must(b, s.Synchronize())
			})
		}
		if n, _ := DeviceCount(); n >= 2 {
			benchPeerProbes(b, probe)
		}
		benchServe(b, probe)
	}
	for _, ranks := range []int{1, 2} {
		if n, _ := DeviceCount(); n < ranks {
			continue
		}
		g := newFloorGroup(b, ranks)
		for _, size := range []int{8, 16 << 10, 256 << 10, 1 << 20, 4 << 20} {
			for _, wait := range []string{"sync", "poll", "serve", "serve+ctxsync", "poll+compute", "serve+compute", "poll+fma", "serve+fma"} {
				if strings.Contains(wait, "+") && size != 8 {
					continue
				}
				spin := time.Duration(0)
				if wait != "sync" {
					spin = time.Millisecond
				}
				b.Run(fmt.Sprintf("push/ranks=%d/size=%s/wait=%s", ranks, sizeName(size), wait), func(b *testing.B) {
					g.run(b, size, spin, wait)
				})
			}
		}
		g.free()
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

var floorSchedOnce sync.Once

// floorSched applies GORUN_GPU_FLOOR_SCHED to every device's primary
// context before anything retains one.
func floorSched(b *testing.B) {
	floorSchedOnce.Do(func() {
		v := os.Getenv("GORUN_GPU_FLOOR_SCHED")
		if v == "" {
			return
		}
		f, ok := map[string]cuda.ContextFlags{"auto": cuda.SchedAuto, "spin": cuda.SchedSpin,
			"yield": cuda.SchedYield, "blocking": cuda.SchedBlockingSync}[v]
		if !ok {
			b.Fatalf("GORUN_GPU_FLOOR_SCHED=%q: want auto, spin, yield or blocking", v)
		}
		n, err := cuda.DeviceCount()
		if err != nil {
			return // requireGPU skips
		}
		for d := range n {
			if err := cuda.SetPrimaryContextFlags(cuda.Device(d), f); err != nil {
				b.Fatalf("device %d: %v", d, err)
			}
		}
	})
}

// loadProbe loads testdata/probe.cu's PTX into ctx, or returns nil when it
// is not there.
func loadProbe(b *testing.B, ctx *cuda.Context) *cuda.Module {
	path := os.Getenv("GORUN_GPU_PROBE_PTX")
	if path == "" {
		path = "testdata/probe.ptx"
	}
	ptx, err := os.ReadFile(path)
	if err != nil {
		b.Logf("no probe kernels (%v): launch+poll, pingpong and fence skipped", err)
		return nil
	}
	m, err := ctx.LoadModule(ptx)
	must(b, err)
	return m
}

// benchPeerProbes runs pingpong and fence between devices 0 and 1 (probe
// loaded in device 0's context; device 1's is loaded here).
func benchPeerProbes(b *testing.B, probe0 *cuda.Module) {
	must(b, EnablePeerAccess(0, 1))
	must(b, EnablePeerAccess(1, 0))
	ctx1, err := DeviceContext(1)
	must(b, err)
	probe1 := loadProbe(b, ctx1)
	var side [2]struct {
		s    *cuda.Stream
		flag Buffer // the word the other side sets
		out  Buffer
		f    *cuda.Function
	}
	for d, m := range []*cuda.Module{probe0, probe1} {
		c, _ := DeviceContext(d)
		side[d].s, err = c.NewStream()
		must(b, err)
		defer side[d].s.Destroy()
		side[d].flag, err = Alloc(d, Uint8, 256)
		must(b, err)
		defer side[d].flag.Free()
		must(b, side[d].flag.CopyFromHost(make([]byte, 256)))
		side[d].out, err = Alloc(d, Uint8, 16)
		must(b, err)
		defer side[d].out.Free()
		side[d].f, err = m.Function("probe_pingpong")
		must(b, err)
	}
	const iters = 100
	base := uint64(0)
	b.Run("pingpong", func(b *testing.B) {
		var ns float64
		for range b.N {
			for d := range 2 {
				var ka cuda.KernelArgs
				ka.U64(uint64(side[d].flag.DevicePtr()))
				ka.U64(uint64(side[1-d].flag.DevicePtr()))
				ka.U64(base)
				ka.U32(iters)
				ka.U32(uint32(1 - d))
				ka.U64(uint64(side[d].out.DevicePtr()))
				must(b, side[d].s.LaunchArgs(side[d].f, cuda.D1(1), cuda.D1(32), 0, &ka))
			}
			for d := range 2 {
				must(b, side[d].s.Synchronize())
			}
			base += iters
			var out [2]int64
			must(b, Download(out[:], Wrap(0, side[0].out.Ptr(), Int64, 2)))
			if out[1] != 0 {
				b.Fatal("pingpong: a wait gave up")
			}
			ns += float64(out[0]) / (2 * iters)
		}
		b.ReportMetric(ns/float64(b.N), "ns/one-way")
	})
	fence, err := probe0.Function("probe_fence")
	must(b, err)
	modes := []string{"all-sc.sys", "one-sc.sys", "one-acq_rel.sys", "one-acq_rel.gpu", "all-sc.gpu", "none"}
	for _, where := range []int{0, 1} {
		dst, err := Alloc(where, Uint8, 1<<20)
		must(b, err)
		for _, n := range []int{0, 16 << 10} {
			for mode, mname := range modes {
				name := "local"
				if where == 1 {
					name = "peer"
				}
				b.Run(fmt.Sprintf("fence/%s/%s/%s", mname, name, sizeName(n)), func(b *testing.B) {
					var f float64
					for range b.N {
						var ka cuda.KernelArgs
						ka.U64(uint64(dst.DevicePtr()))
						ka.U64(uint64(n))
						ka.U32(uint32(mode))
						ka.U64(uint64(side[0].out.DevicePtr()))
						must(b, side[0].s.LaunchArgs(fence, cuda.D1(1), cuda.D1(reduceThreads), 0, &ka))
						must(b, side[0].s.Synchronize())
						var out [1]int64
						must(b, Download(out[:], Wrap(0, side[0].out.Ptr(), Int64, 1)))
						f += float64(out[0])
					}
					b.ReportMetric(f/float64(b.N), "fence-ns")
				})
			}
		}
		must(b, dst.Free())
	}
}

// floorGroup is a push region per GPU for ranks GPUs (0..ranks-1) in this
// process, each addressing the others by peer access, with their calls'
// numbering (coll's ipcState.nextPush).
type floorGroup struct {
	ranks          int
	reg            []PushRegion
	words          []*PushWords
	streams        []*cuda.Stream
	regions, table []Buffer
	in, out        []Buffer
	seq            uint64
	sets           PushSets
	// the compute variants' reduce (dst = a + b), probe_fma (nil without
	// the probe kernels) and stream, per GPU
	ca, cb, cd []Buffer
	fma        []*cuda.Function
	fmaGrid    []int
	cs         []*cuda.Stream
}

// floorCompute is the compute variants' reduce: elements of float32.
const floorCompute = 8 << 20

// envInt is the integer in environment variable name, or 0.
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// computeSetUp allocates the compute variants' buffers and streams, once.
func (g *floorGroup) computeSetUp(b *testing.B) {
	if g.cs != nil {
		return
	}
	for d := range g.ranks {
		for _, p := range []*[]Buffer{&g.ca, &g.cb, &g.cd} {
			buf, err := Alloc(d, Float32, floorCompute)
			must(b, err)
			must(b, buf.CopyFromHost(make([]byte, 4*floorCompute)))
			*p = append(*p, buf)
		}
		c, _ := DeviceContext(d)
		s, err := c.NewStream()
		must(b, err)
		g.cs = append(g.cs, s)
		var f *cuda.Function
		grid := 0
		if m := loadProbe(b, c); m != nil {
			f, err = m.Function("probe_fma")
			must(b, err)
			ks, err := kernelsFor(c)
			must(b, err)
			// one wave of 512-thread blocks (the reduce kernels'), each
			// thread storing one float32 of cd
			grid = min(ks.maxBlocks*max(1, envInt("GORUN_GPU_FLOOR_FMA_WAVES")), floorCompute/512)
		}
		g.fma, g.fmaGrid = append(g.fma, f), append(g.fmaGrid, grid)
	}
}

// compute runs the compute variants' kernel on device d's own stream, to
// its end: probe_fma, or the reduce.
func (g *floorGroup) compute(d int, fma bool) error {
	var err error
	if fma {
		var a cuda.KernelArgs
		a.U64(uint64(g.cd[d].DevicePtr()))
		a.U32(1000)
		err = g.cs[d].LaunchArgs(g.fma[d], cuda.D1(g.fmaGrid[d]), cuda.D1(reduceThreads), 0, &a)
	} else {
		err = Reduce(g.cs[d], Sum, g.cd[d], g.ca[d], g.cb[d])
	}
	if err != nil {
		return err
	}
	return g.cs[d].Synchronize()
}

const floorSlot = 4 << 20

func newFloorGroup(b testing.TB, ranks int) *floorGroup {
	g := &floorGroup{ranks: ranks}
	flags := 2 * ranks * floorSlot
	for d := range ranks {
		for p := range ranks {
			if p != d {
				must(b, EnablePeerAccess(d, p))
			}
		}
		r, err := Alloc(d, Uint8, flags+PushWordBytes(ranks))
		must(b, err)
		must(b, r.Slice(flags, r.Len()).CopyFromHost(make([]byte, PushWordBytes(ranks))))
		g.regions = append(g.regions, r)
		in, err := Alloc(d, Float32, floorSlot/4)
		must(b, err)
		ones := make([]float32, floorSlot/4)
		for i := range ones {
			ones[i] = float32(d + 1)
		}
		must(b, Upload(in, ones))
		out, err := Alloc(d, Float32, floorSlot/4)
		must(b, err)
		g.in, g.out = append(g.in, in), append(g.out, out)
		w, err := NewPushWords(d)
		must(b, err)
		g.words = append(g.words, w)
		c, _ := DeviceContext(d)
		s, err := c.NewStream()
		must(b, err)
		g.streams = append(g.streams, s)
	}
	addrs := make([]int64, ranks)
	for d, r := range g.regions {
		addrs[d] = int64(r.Ptr())
	}
	for d := range ranks {
		t, err := Alloc(d, Int64, ranks)
		must(b, err)
		must(b, Upload(t, addrs))
		g.table = append(g.table, t)
		g.reg = append(g.reg, PushRegion{Table: t.DevicePtr(), Ranks: ranks, Rank: d, Slot: floorSlot, Flags: flags,
			Words: g.words[d], Timeout: time.Second})
	}
	return g
}

// next numbers the next call and takes its set of slots.
func (g *floorGroup) next() PushCall {
	g.seq++
	return g.sets.Next(g.seq)
}

// run times b.N allreduces of size bytes, one goroutine per GPU lined up
// before every call, and checks the last one's sum; wait serve: on the
// devices' resident kernels (Server, waiting 100 µs for the next call),
// serve+ctxsync: each call followed by a synchronization of the device's
// context, which waits for the resident kernel to end (what a program's
// cudaDeviceSynchronize after a call costs).
func (g *floorGroup) run(b *testing.B, size int, spin time.Duration, wait string) {
	serve := strings.HasPrefix(wait, "serve")
	fma := strings.HasSuffix(wait, "+fma")
	compute := fma || strings.HasSuffix(wait, "+compute")
	if compute {
		g.computeSetUp(b)
		if fma && g.fma[0] == nil {
			b.Skip("no probe kernels: no probe_fma")
		}
	}
	calls := make([]PushCall, b.N)
	for i := range calls {
		calls[i] = g.next()
	}
	total, computed := make([]time.Duration, g.ranks), make([]time.Duration, g.ranks)
	errs := make([]error, g.ranks)
	b.ResetTimer()
	inLockstep(g.ranks, func(d int, bar *spinBarrier) {
		in, out := g.in[d].Slice(0, size/4), g.out[d].Slice(0, size/4)
		reg := g.reg[d]
		if serve {
			var err error
			if reg.Server, err = ServerFor(d, 100*time.Microsecond); err == nil && reg.Server == nil {
				err = errors.New("no resident kernel in the loaded PTX")
			}
			if n := envInt("GORUN_GPU_FLOOR_SERVE_GRID"); err == nil && n > 0 && reg.Server.blocks != n {
				setGrid(reg.Server, n)
			}
			if err != nil {
				errs[d] = err
				return
			}
		}
		for _, pc := range calls {
			bar.wait()
			t0 := time.Now()
			if err := AllreducePush(g.streams[d], Sum, reg, pc, in, out); err != nil {
				errs[d] = err
				return
			}
			gaveUp, err := g.words[d].Wait(g.streams[d], pc.Seq, spin)
			if err == nil && gaveUp {
				err = fmt.Errorf("device %d: call %d gave up waiting", d, pc.Seq)
			}
			if err == nil && wait == "serve+ctxsync" {
				err = g.streams[d].Context().Synchronize()
			}
			if err == nil && compute {
				c0 := time.Now()
				err = g.compute(d, fma)
				computed[d] += time.Since(c0)
			}
			if err != nil {
				errs[d] = err
				return
			}
			total[d] += time.Since(t0)
		}
	})
	b.StopTimer()
	for _, err := range errs {
		must(b, err)
	}
	slowest, slowestCompute := time.Duration(0), time.Duration(0)
	for d := range g.ranks {
		slowest, slowestCompute = max(slowest, total[d]), max(slowestCompute, computed[d])
		must(b, g.streams[d].Synchronize())
		g.expectOut(b, "floor", d, slices.Repeat([]float32{float32(g.ranks * (g.ranks + 1) / 2)}, size/4))
		must(b, g.out[d].CopyFromHost(make([]byte, size))) // the next run must write it again
	}
	b.ReportMetric(float64(slowest.Nanoseconds())/float64(b.N), "ns/call")
	if compute {
		b.ReportMetric(float64(slowestCompute.Nanoseconds())/float64(b.N), "compute-ns")
	}
}

func (g *floorGroup) free() {
	for d := range len(g.cs) {
		_ = g.cs[d].Destroy()
		for _, buf := range []Buffer{g.ca[d], g.cb[d], g.cd[d]} {
			_ = buf.Free()
		}
	}
	for d := range g.ranks {
		_ = g.streams[d].Destroy()
		_ = g.words[d].Free()
		for _, buf := range []Buffer{g.table[d], g.in[d], g.out[d]} {
			_ = buf.Free()
		}
		// The regions are freed too: nothing maps them by IPC.
		_ = g.regions[d].Free()
	}
}

// spinBarrier lines up n goroutines (each on its own OS thread) without
// sleeping.
type spinBarrier struct {
	n          int32
	count, gen atomic.Int32
}

func (s *spinBarrier) wait() {
	g := s.gen.Load()
	if s.count.Add(1) == s.n {
		s.count.Store(0)
		s.gen.Add(1)
		return
	}
	for s.gen.Load() == g {
	}
}

// inLockstep runs f(d, bar) for d from 0 to n-1 at once, each on a
// goroutine locked to an OS thread of its own, with bar a spinBarrier of
// the n, and returns when all have.
func inLockstep(n int, f func(d int, bar *spinBarrier)) {
	bar := &spinBarrier{n: int32(n)}
	var wg sync.WaitGroup
	for d := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f(d, bar)
		}()
	}
	wg.Wait()
}

// benchServe times probe_serve (testdata/probe.cu): calls handed to a
// running kernel through mapped host memory, the floor of a persistent
// kernel against launch+poll's. serve/gpus=1: one GPU, the host's
// command word to the kernel and its answer back; serve/gpus=2: one
// goroutine a GPU, lined up before each call as push/ranks=2's are, each
// kernel bouncing a flag with the other's before it answers (the floor of
// an 8-byte allreduce by such kernels). blocks: the grid, every block's
// thread 0 polling the command word.
func benchServe(b *testing.B, probe0 *cuda.Module) {
	gpus := 1
	if n, _ := DeviceCount(); n >= 2 {
		gpus = 2
	}
	mods := []*cuda.Module{probe0}
	if gpus == 2 {
		ctx1, err := DeviceContext(1)
		must(b, err)
		mods = append(mods, loadProbe(b, ctx1))
	}
	type side struct {
		s        *cuda.Stream
		f        *cuda.Function
		cmd, ans *PushWords
		flag     Buffer // the word the other GPU sets
		count    Buffer
		out      Buffer
	}
	sides := make([]side, gpus)
	for d := range gpus {
		c, err := DeviceContext(d)
		must(b, err)
		sd := &sides[d]
		sd.s, err = c.NewStream()
		must(b, err)
		defer sd.s.Destroy()
		sd.f, err = mods[d].Function("probe_serve")
		must(b, err)
		sd.cmd, err = NewPushWords(d)
		must(b, err)
		defer sd.cmd.Free()
		sd.ans, err = NewPushWords(d)
		must(b, err)
		defer sd.ans.Free()
		for _, buf := range []*Buffer{&sd.flag, &sd.count, &sd.out} {
			*buf, err = Alloc(d, Uint8, 64)
			must(b, err)
			defer buf.Free()
			must(b, buf.CopyFromHost(make([]byte, 64)))
		}
	}
	base := uint64(0)
	for g := 1; g <= gpus; g++ {
		for _, blocks := range []int{1, 16} {
			b.Run(fmt.Sprintf("serve/gpus=%d/blocks=%d", g, blocks), func(b *testing.B) {
				for d := range g {
					sd := &sides[d]
					must(b, sd.count.CopyFromHost(make([]byte, 64)))
					var ka cuda.KernelArgs
					ka.U64(uint64(sd.cmd.Done()))
					ka.U64(uint64(sd.ans.Done()))
					ka.U64(uint64(sd.flag.DevicePtr()))
					ka.U64(uint64(sides[(d+1)%gpus].flag.DevicePtr()))
					ka.U64(uint64(sd.count.DevicePtr()))
					ka.U64(base)
					ka.U32(uint32(b.N))
					ka.U32(uint32(g - 1))
					ka.U64(uint64(sd.out.DevicePtr()))
					must(b, sd.s.LaunchArgs(sd.f, cuda.D1(blocks), cuda.D1(32), 0, &ka))
				}
				total := make([]time.Duration, g)
				b.ResetTimer()
				inLockstep(g, func(d int, bar *spinBarrier) {
					sd := &sides[d]
					for i := 1; i <= b.N; i++ {
						v := base + uint64(i)
						bar.wait()
						t0 := time.Now()
						sd.cmd.done.Store(v)
						for j := 0; sd.ans.done.Load() != v; j++ {
							if j&1023 == 0 && time.Since(t0) > 5*time.Second {
								return // the kernel's out[1] says why
							}
						}
						total[d] += time.Since(t0)
					}
				})
				b.StopTimer()
				slowest := time.Duration(0)
				for d := range g {
					must(b, sides[d].s.Synchronize())
					var out [2]int64
					must(b, Download(out[:], Wrap(d, sides[d].out.Ptr(), Int64, 2)))
					if out[1] != 0 || sides[d].ans.done.Load() != base+uint64(b.N) {
						b.Fatalf("device %d: serve kernel gave up (answer %d, want %d)", d, sides[d].ans.done.Load(), base+uint64(b.N))
					}
					slowest = max(slowest, total[d])
				}
				base += uint64(b.N)
				b.ReportMetric(float64(slowest.Nanoseconds())/float64(b.N), "ns/call")
			})
		}
	}
}
