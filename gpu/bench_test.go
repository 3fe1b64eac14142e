package gpu

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu/cuda"
)

// Benchmarks, run on the GPU host by gpu/run-gpu-tests.sh:
//
//   - BenchmarkGPUPeerCopyIPC: copy-engine bandwidth between every GPU pair,
//     each side in its own process, the destination mapped through CUDA IPC
//     (the path btl/cuda takes). Reference on 4x H200 with NVLink 4 x18:
//     395 GB/s one way, 768 GB/s both ways (docs/measurements.md).
//   - BenchmarkGPUReduce: the reduce kernels, counting bytes read and written
//     (3 per element byte), against BenchmarkGPUCopyD2D, a device-to-device
//     copy counting read + write: the memory bandwidth ceiling (about 4.3
//     TB/s on an H200).
//
// GORUN_GPU_BENCH_BYTES sets the size of each copy or buffer (256 MiB).

// benchBytes is the size of each benchmark copy and buffer.
func benchBytes() int {
	if v, err := strconv.Atoi(os.Getenv("GORUN_GPU_BENCH_BYTES")); err == nil && v > 0 {
		return v
	}
	return 256 << 20
}

// benchPeer is the second process of BenchmarkGPUPeerCopyIPC, and this
// process's side of it. Each process has a source buffer on every GPU and,
// for every ordered GPU pair (i, j), a receive buffer on j that the other
// process's GPU i writes into through IPC.
type benchPeer struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	bytes   int
	src     []Buffer       // src[g]: this process's source on GPU g
	recv    [][]Buffer     // recv[i][j]: on GPU j, written by the child's GPU i
	remote  [][]Buffer     // remote[i][j]: the child's recv[i][j], mapped here on GPU i
	streams []*cuda.Stream // per GPU
}

var (
	peerOnce sync.Once
	peer     *benchPeer
	peerErr  error
)

// getBenchPeer starts the child once for all peer benchmarks.
func getBenchPeer(b *testing.B, n int) *benchPeer {
	peerOnce.Do(func() { peer, peerErr = startBenchPeer(n) })
	if peerErr != nil {
		b.Fatal(peerErr)
	}
	return peer
}

// stopBenchPeer ends the child, if one was started; TestMain calls it.
func stopBenchPeer() {
	if peer == nil {
		return
	}
	fmt.Fprintln(peer.in, "QUIT")
	_ = peer.in.Close()
	done := make(chan error, 1)
	go func() { done <- peer.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = peer.cmd.Process.Kill()
	}
}

// benchSides allocates one process's buffers and streams.
func benchSides(n, size int) (src []Buffer, recv [][]Buffer, streams []*cuda.Stream, err error) {
	src = make([]Buffer, n)
	recv = make([][]Buffer, n)
	streams = make([]*cuda.Stream, n)
	for g := 0; g < n; g++ {
		if src[g], err = Alloc(g, Uint8, size); err != nil {
			return
		}
		c, _ := DeviceContext(g)
		if err = c.Memset(src[g].DevicePtr(), byte(0x11*(g+1)), size); err != nil {
			return
		}
		if streams[g], err = c.NewStream(); err != nil {
			return
		}
		recv[g] = make([]Buffer, n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				if recv[i][j], err = Alloc(j, Uint8, size); err != nil {
					return
				}
			}
		}
	}
	return
}

// exportLine is "H i j <handle>" for recv[i][j].
func exportLine(i, j int, b Buffer) (string, error) {
	h, err := b.ExportIPC()
	if err != nil {
		return "", err
	}
	hb, _ := h.MarshalBinary()
	return fmt.Sprintf("H %d %d %s", i, j, hex.EncodeToString(hb)), nil
}

// openLine maps the buffer of an "H i j <handle>" line on GPU i.
func openLine(f []string) (i, j int, b Buffer, err error) {
	i, _ = strconv.Atoi(f[1])
	j, _ = strconv.Atoi(f[2])
	hb, err := hex.DecodeString(f[3])
	if err != nil {
		return
	}
	var h IPCHandle
	if err = h.UnmarshalBinary(hb); err != nil {
		return
	}
	b, err = OpenIPC(i, h)
	return
}

func startBenchPeer(n int) (*benchPeer, error) {
	p := &benchPeer{bytes: benchBytes()}
	var err error
	if p.src, p.recv, p.streams, err = benchSides(n, p.bytes); err != nil {
		return nil, fmt.Errorf("bench parent: %w", err)
	}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), childEnv+"=bench", "GORUN_GPU_BENCH_BYTES="+strconv.Itoa(p.bytes))
	p.cmd.Stderr = os.Stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 4096), 1<<20)
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.remote = make([][]Buffer, n)
	for i := range p.remote {
		p.remote[i] = make([]Buffer, n)
	}
	for {
		line, err := p.readLine()
		if err != nil {
			return nil, err
		}
		if line == "READY" {
			break
		}
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "H" {
			i, j, b, err := openLine(f)
			if err != nil {
				return nil, fmt.Errorf("bench parent: open child's buffer: %w", err)
			}
			p.remote[i][j] = b
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			line, err := exportLine(i, j, p.recv[i][j])
			if err != nil {
				return nil, fmt.Errorf("bench parent: %w", err)
			}
			fmt.Fprintln(p.in, line)
		}
	}
	fmt.Fprintln(p.in, "GO")
	if line, err := p.readLine(); err != nil || line != "OPENED" {
		return nil, fmt.Errorf("bench child did not open our buffers: %q %v", line, err)
	}
	return p, nil
}

// readLine returns the child's next protocol line.
func (p *benchPeer) readLine() (string, error) {
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return "", fmt.Errorf("bench child: %w", err)
		}
		return "", fmt.Errorf("bench child exited")
	}
	return p.out.Text(), nil
}

// push queues k copies from this process's GPU i into the child's buffer on
// GPU j, on GPU i's stream.
func pushCopies(streams []*cuda.Stream, src []Buffer, remote [][]Buffer, i, j, k int) error {
	for ; k > 0; k-- {
		if err := streams[i].CopyAsync(remote[i][j].DevicePtr(), src[i].DevicePtr(), src[i].Len()); err != nil {
			return err
		}
	}
	return nil
}

// benchChild is the child of BenchmarkGPUPeerCopyIPC.
func benchChild() error {
	n, err := DeviceCount()
	if err != nil {
		return err
	}
	size := benchBytes()
	src, recv, streams, err := benchSides(n, size)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				line, err := exportLine(i, j, recv[i][j])
				if err != nil {
					return err
				}
				fmt.Fprintln(out, line)
			}
		}
	}
	fmt.Fprintln(out, "READY")
	out.Flush()
	remote := make([][]Buffer, n)
	for i := range remote {
		remote[i] = make([]Buffer, n)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 4096), 1<<20)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 4 && f[0] == "H":
			i, j, b, err := openLine(f)
			if err != nil {
				return err
			}
			remote[i][j] = b
		case len(f) == 1 && f[0] == "GO":
			fmt.Fprintln(out, "OPENED")
		case len(f) == 4 && f[0] == "PUSH":
			i, _ := strconv.Atoi(f[1])
			j, _ := strconv.Atoi(f[2])
			k, _ := strconv.Atoi(f[3])
			if err := pushCopies(streams, src, remote, i, j, k); err != nil {
				return err
			}
			if err := streams[i].Synchronize(); err != nil {
				return err
			}
			fmt.Fprintln(out, "DONE")
		case len(f) == 1 && f[0] == "QUIT":
			for i := range remote {
				for _, b := range remote[i] {
					if b.Len() > 0 {
						_ = b.Free()
					}
				}
			}
			return nil
		}
		out.Flush()
	}
	return in.Err()
}

func BenchmarkGPUPeerCopyIPC(b *testing.B) {
	n := requireGPU(b, 2)
	p := getBenchPeer(b, n)
	size := p.bytes
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			b.Run(fmt.Sprintf("src=%d/dst=%d/dir=one", i, j), func(b *testing.B) {
				b.SetBytes(int64(size))
				must(b, pushCopies(p.streams, p.src, p.remote, i, j, 1))
				must(b, p.streams[i].Synchronize())
				b.ResetTimer()
				must(b, pushCopies(p.streams, p.src, p.remote, i, j, b.N))
				must(b, p.streams[i].Synchronize())
				b.StopTimer()
				b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
	both := func(i, j, k int) error {
		fmt.Fprintf(p.in, "PUSH %d %d %d\n", j, i, k)
		if err := pushCopies(p.streams, p.src, p.remote, i, j, k); err != nil {
			return err
		}
		if err := p.streams[i].Synchronize(); err != nil {
			return err
		}
		if line, err := p.readLine(); err != nil || line != "DONE" {
			return fmt.Errorf("bench child: %q %v", line, err)
		}
		return nil
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			b.Run(fmt.Sprintf("pair=%d-%d/dir=both", i, j), func(b *testing.B) {
				b.SetBytes(2 * int64(size))
				must(b, both(i, j, 1))
				b.ResetTimer()
				must(b, both(i, j, b.N))
				b.StopTimer()
				b.ReportMetric(2*float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// fillRandom fills b with random valid elements: 16 MiB generated here,
// repeated on the device.
func fillRandom(tb testing.TB, b Buffer) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	chunk := min(b.Count(), (16<<20)/b.DType().Size())
	must(tb, b.CopyFromHost(randomElements(rng, b.DType(), chunk)))
	c, _ := DeviceContext(b.Device())
	for off := chunk; off < b.Count(); off += chunk {
		k := min(chunk, b.Count()-off)
		must(tb, c.CopyDtoD(b.Slice(off, off+k).DevicePtr(), b.DevicePtr(), k*b.DType().Size()))
	}
}

func BenchmarkGPUCopyD2D(b *testing.B) {
	requireGPU(b, 1)
	size := benchBytes()
	src, err := Alloc(0, Uint8, size)
	must(b, err)
	defer src.Free()
	dst, err := Alloc(0, Uint8, size)
	must(b, err)
	defer dst.Free()
	fillRandom(b, src)
	c, _ := DeviceContext(0)
	s, err := c.NewStream()
	must(b, err)
	defer s.Destroy()
	b.SetBytes(2 * int64(size)) // read + write
	must(b, s.CopyDtoDAsync(dst.DevicePtr(), src.DevicePtr(), size))
	must(b, s.Synchronize())
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		must(b, s.CopyDtoDAsync(dst.DevicePtr(), src.DevicePtr(), size))
	}
	must(b, s.Synchronize())
	b.StopTimer()
	b.ReportMetric(2*float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func BenchmarkGPUReduce(b *testing.B) {
	requireGPU(b, 1)
	must(b, LoadKernels(0))
	size := benchBytes()
	c, _ := DeviceContext(0)
	s, err := c.NewStream()
	must(b, err)
	defer s.Destroy()
	for _, dt := range DTypes {
		count := size / dt.Size()
		var bufs [3]Buffer
		for i := range bufs {
			bufs[i], err = Alloc(0, dt, count)
			must(b, err)
			fillRandom(b, bufs[i])
		}
		for _, op := range Ops {
			for _, mode := range []string{"out", "inplace"} {
				if mode == "inplace" && op != Sum {
					continue
				}
				dst := bufs[2]
				if mode == "inplace" {
					dst = bufs[0]
				}
				b.Run(fmt.Sprintf("dtype=%v/op=%v/%s", dt, op, mode), func(b *testing.B) {
					b.SetBytes(3 * int64(count*dt.Size())) // two reads, one write
					must(b, Reduce(s, op, dst, bufs[0], bufs[1]))
					must(b, s.Synchronize())
					b.ResetTimer()
					for k := 0; k < b.N; k++ {
						must(b, Reduce(s, op, dst, bufs[0], bufs[1]))
					}
					must(b, s.Synchronize())
					b.StopTimer()
					b.ReportMetric(3*float64(count*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
		for _, buf := range bufs {
			must(b, buf.Free())
		}
	}
}

// BenchmarkGPUCopyPatterns times the copy engines between the GPUs of one
// process (peer access on, the same engines as btl/cuda's IPC copies) in
// the patterns the large-message collectives use, each copy
// GORUN_GPU_BENCH_BYTES: one copy pushed by its source's stream or pulled
// by its destination's; one GPU pushing to every other at once, one stream
// per peer (fanout); every GPU pushing to the next (ring); every GPU
// pushing to every other (a2a); the same with one stream per GPU (a2a-1s:
// btl/cuda's single copy stream per device); and the reduce kernel reading
// one operand from a peer (sm-pull: the SM-driven read of a remote buffer).
// GB/s is what one GPU sends (or reads, sm-pull) per second.
func BenchmarkGPUCopyPatterns(b *testing.B) {
	n := requireGPU(b, 2)
	size := benchBytes()
	src := make([]Buffer, n)
	dst := make([][]Buffer, n) // dst[j][i]: on GPU j, written by GPU i
	str := make([][]*cuda.Stream, n)
	for i := range n {
		var err error
		src[i], err = Alloc(i, Float32, size/4)
		must(b, err)
		fillRandom(b, src[i])
		dst[i] = make([]Buffer, n)
		str[i] = make([]*cuda.Stream, n)
		for j := range n {
			dst[i][j], err = Alloc(i, Float32, size/4)
			must(b, err)
			str[i][j], err = NewStream(i)
			must(b, err)
			if j != i {
				must(b, EnablePeerAccess(i, j))
			}
		}
	}
	defer func() {
		for i := range n {
			src[i].Free()
			for j := range n {
				dst[i][j].Free()
				str[i][j].Destroy()
			}
		}
	}()
	type cp struct{ s, from, to int } // stream str[s][to-or-from], src[from] -> dst[to][from]
	run := func(b *testing.B, cps []cp, perGPU int, oneStream bool) {
		do := func() {
			for _, c := range cps {
				k := c.to
				if c.s == c.to {
					k = c.from
				}
				if oneStream {
					k = 0
				}
				must(b, str[c.s][k].CopyAsync(dst[c.to][c.from].DevicePtr(), src[c.from].DevicePtr(), size))
			}
		}
		syncAll := func() {
			for i := range n {
				for j := range n {
					must(b, str[i][j].Synchronize())
				}
			}
		}
		do()
		syncAll()
		b.ResetTimer()
		for range b.N {
			do()
		}
		syncAll()
		b.StopTimer()
		b.ReportMetric(float64(perGPU)*float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	}
	b.Run("one-push", func(b *testing.B) { run(b, []cp{{0, 0, 1}}, 1, false) })
	b.Run("one-pull", func(b *testing.B) { run(b, []cp{{1, 0, 1}}, 1, false) })
	var fan, ring, a2a []cp
	for j := 1; j < n; j++ {
		fan = append(fan, cp{0, 0, j})
	}
	for i := range n {
		ring = append(ring, cp{i, i, (i + 1) % n})
		for j := range n {
			if j != i {
				a2a = append(a2a, cp{i, i, j})
			}
		}
	}
	b.Run("fanout", func(b *testing.B) { run(b, fan, n-1, false) })
	b.Run("ring", func(b *testing.B) { run(b, ring, 1, false) })
	b.Run("a2a", func(b *testing.B) { run(b, a2a, n-1, false) })
	b.Run("a2a-1s", func(b *testing.B) { run(b, a2a, n-1, true) })
	b.Run("sm-pull", func(b *testing.B) {
		s := str[0][0]
		must(b, Reduce(s, Sum, dst[0][0], src[0], src[1]))
		must(b, s.Synchronize())
		b.ResetTimer()
		for range b.N {
			must(b, Reduce(s, Sum, dst[0][0], src[0], src[1]))
		}
		must(b, s.Synchronize())
		b.StopTimer()
		b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}

// BenchmarkGPUCopyHost times the two copy stages of the staged path alone
// (btl/cuda's StageOp: p2p/stage.go's pipeline): device to host and host
// to device, into pinned memory (cuMemHostAlloc, the staging pool's) and
// pageable memory (what staging falls back to when the pool is spent), in
// copies of chunk bytes back to back on one stream, GORUN_GPU_BENCH_BYTES
// in all. GB/s is bytes copied per second. The third stage, the wire, is
// osu bw between host buffers over the same transport (docs/gpu.md).
func BenchmarkGPUCopyHost(b *testing.B) {
	requireGPU(b, 1)
	size := benchBytes()
	dev, err := Alloc(0, Uint8, size)
	must(b, err)
	defer dev.Free()
	fillRandom(b, dev)
	c, _ := DeviceContext(0)
	s, err := c.NewStream()
	must(b, err)
	defer s.Destroy()
	pinned, err := c.HostAlloc(size, 0)
	must(b, err)
	defer pinned.Free()
	hosts := map[string][]byte{"pinned": pinned.Bytes(), "pageable": make([]byte, size)}
	for _, kind := range []string{"pinned", "pageable"} {
		h := hosts[kind]
		for _, dir := range []string{"d2h", "h2d"} {
			for _, chunk := range []int{256 << 10, 1 << 20, 4 << 20, 16 << 20} {
				if chunk > size {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/chunk=%d", kind, dir, chunk), func(b *testing.B) {
					run := func() {
						for off := 0; off+chunk <= size; off += chunk {
							p := dev.DevicePtr() + cuda.DevicePtr(off)
							if dir == "d2h" {
								must(b, s.CopyDtoHAsync(h[off:off+chunk], p))
							} else {
								must(b, s.CopyHtoDAsync(p, h[off:off+chunk]))
							}
						}
						must(b, s.Synchronize())
					}
					run()
					b.ResetTimer()
					for range b.N {
						run()
					}
					b.StopTimer()
					b.ReportMetric(float64(size/chunk*chunk)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkGPUStageSmall times the copies of a staged eager message alone
// (issue 10's "measure the stages alone" for messages up to the eager
// limit): a window of 64 copies between device memory and pinned host
// memory, one per message, as osu_bw sends them, each waited for the way
// btl/cuda waits: "event-each" records an event behind every copy and
// polls them in order (what btl/cuda does today), "event-window" records
// one event behind the window's last copy, "copy-sync" synchronizes the
// stream once a window (the floor: no event at all), "batch-window" queues
// the window's copies with one call (cuMemcpyBatchAsync) and one event
// behind them. It reports messages
// a second; the wire's rate alone is the host-memory osu_bw at the same
// size.
func BenchmarkGPUStageSmall(b *testing.B) {
	requireGPU(b, 1)
	const window = 64
	c, _ := DeviceContext(0)
	s, err := c.NewStream()
	must(b, err)
	defer s.Destroy()
	evs := make([]*cuda.Event, window)
	for i := range evs {
		evs[i], err = c.NewEvent(cuda.EventDisableTiming)
		must(b, err)
		defer evs[i].Destroy()
	}
	for _, size := range []int{8, 1 << 10, 8 << 10, 64 << 10} {
		dev, err := Alloc(0, Uint8, size*window)
		must(b, err)
		defer dev.Free()
		pinned, err := c.HostAlloc(size*window, 0)
		must(b, err)
		defer pinned.Free()
		h := pinned.Bytes()
		for _, dir := range []string{"d2h", "h2d"} {
			for _, wait := range []string{"event-each", "event-window", "copy-sync", "batch-window"} {
				b.Run(fmt.Sprintf("%s/%s/size=%d", dir, wait, size), func(b *testing.B) {
					if wait == "batch-window" && !cuda.BatchCopies() {
						b.Skip("no cuMemcpyBatchAsync_v2 in this driver")
					}
					var batch cuda.CopyBatch
					run := func() {
						batch.Reset()
						for i := range window {
							p := dev.DevicePtr() + cuda.DevicePtr(i*size)
							hb := h[i*size : (i+1)*size]
							switch {
							case wait == "batch-window" && dir == "d2h":
								batch.AddDtoH(hb, p)
							case wait == "batch-window":
								batch.AddHtoD(p, hb)
							case dir == "d2h":
								must(b, s.CopyDtoHAsync(hb, p))
							default:
								must(b, s.CopyHtoDAsync(p, hb))
							}
							if wait == "event-each" {
								must(b, evs[i].Record(s))
							}
						}
						must(b, s.CopyBatchAsync(&batch)) // nothing unless batch-window
						if wait == "event-window" || wait == "batch-window" {
							must(b, evs[window-1].Record(s))
						}
						switch wait {
						case "copy-sync":
							must(b, s.Synchronize())
						case "event-window", "batch-window":
							for {
								ok, err := evs[window-1].Done()
								must(b, err)
								if ok {
									break
								}
							}
						default:
							for i := range window {
								for {
									ok, err := evs[i].Done()
									must(b, err)
									if ok {
										break
									}
								}
							}
						}
					}
					run()
					b.ResetTimer()
					for range b.N {
						run()
					}
					b.StopTimer()
					b.ReportMetric(float64(window*b.N)/b.Elapsed().Seconds()/1e6, "Mmsg/s")
					b.ReportMetric(float64(size*window*b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}
