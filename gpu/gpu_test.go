package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gorun/gorun/gpu/cuda"
)

// Tests that need a GPU. Each skips, saying why, on a machine without one.
// On the GPU host: gpu/run-gpu-tests.sh.

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// smiMatrix parses `nvidia-smi topo -m`: for each row label (GPU0, NIC0), its
// cells by column header.
func smiMatrix(out string) map[string]map[string]string {
	rows := map[string]map[string]string{}
	var hdr []string
	for _, line := range strings.Split(ansiRE.ReplaceAllString(out, ""), "\n") {
		cells := strings.Split(line, "\t")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if hdr == nil {
			if strings.Contains(line, "GPU0") {
				hdr = cells
				if hdr[0] != "" {
					hdr = append([]string{""}, hdr...)
				}
			}
			continue
		}
		if len(cells) < 2 || !regexp.MustCompile(`^(GPU|NIC)\d+$`).MatchString(cells[0]) {
			if strings.HasPrefix(line, "Legend") {
				break
			}
			continue
		}
		r := map[string]string{}
		for i := 1; i < len(cells) && i < len(hdr); i++ {
			r[hdr[i]] = cells[i]
		}
		rows[cells[0]] = r
	}
	return rows
}

func TestGPUDiscoveryMatchesNvidiaSmi(t *testing.T) {
	requireGPU(t, 1)
	smi, err := exec.Command("nvidia-smi", "topo", "-m").CombinedOutput()
	if err != nil {
		t.Skipf("nvidia-smi topo -m: %v: %s", err, smi)
	}
	topo := Discover()
	var buf bytes.Buffer
	if err := WriteTopology(&buf, TopoOptions{Topology: topo}); err != nil {
		t.Fatal(err)
	}
	t.Logf("nvidia-smi topo -m:\n%s\ngorun:\n%s", smi, buf.String())
	rows := smiMatrix(string(smi))
	if len(topo.GPUs) == 0 {
		t.Fatalf("no GPUs discovered: %s", topo.NoGPU)
	}
	for i, g := range topo.GPUs {
		r, ok := rows[fmt.Sprintf("GPU%d", i)]
		if !ok {
			t.Errorf("nvidia-smi has no row GPU%d", i)
			continue
		}
		for j := range topo.GPUs {
			want := r[fmt.Sprintf("GPU%d", j)]
			got := "X"
			if i != j {
				got = topo.Links[i][j].Label()
			}
			if got != want {
				t.Errorf("GPU%d-GPU%d: gorun %q, nvidia-smi %q", i, j, got, want)
			}
		}
		if want, ok := r["CPU Affinity"]; ok && formatCPUList(g.CPUAffinity) != want {
			t.Errorf("GPU%d CPU affinity: gorun %q, nvidia-smi %q", i, formatCPUList(g.CPUAffinity), want)
		}
		if want, ok := r["NUMA Affinity"]; ok && numaString(g.NUMANode) != want {
			t.Errorf("GPU%d NUMA affinity: gorun %q, nvidia-smi %q", i, numaString(g.NUMANode), want)
		}
		if g.CUDA < 0 {
			t.Errorf("GPU%d (%s) has no CUDA ordinal", i, g.PCIBusID)
		}
	}
	if n := len(rows); n < len(topo.GPUs) {
		t.Errorf("nvidia-smi lists %d rows, gorun %d GPUs", n, len(topo.GPUs))
	}
	q, err := exec.Command("nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id,memory.total",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		t.Fatalf("nvidia-smi --query-gpu: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(q)), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 5 {
			t.Fatalf("nvidia-smi --query-gpu line %q", line)
		}
		i, _ := strconv.Atoi(f[0])
		if i >= len(topo.GPUs) {
			t.Errorf("nvidia-smi GPU %d not discovered", i)
			continue
		}
		g := topo.GPUs[i]
		mib, _ := strconv.ParseUint(f[4], 10, 64)
		if g.Name != f[1] || g.UUID != f[2] || g.PCIBusID != canonicalBusID(f[3]) || g.MemoryBytes>>20 != mib {
			t.Errorf("GPU%d: gorun %q %q %q %d MiB; nvidia-smi %q", i, g.Name, g.UUID, g.PCIBusID, g.MemoryBytes>>20, line)
		}
	}
	for _, w := range topo.Warnings {
		t.Logf("warning: %s", w)
	}
}

func TestGPUWriteTopologyProbe(t *testing.T) {
	requireGPU(t, 2)
	var buf bytes.Buffer
	if err := WriteTopology(&buf, TopoOptions{Probe: true, ProbeBytes: 256 << 20, ProbeIters: 10}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
}

func TestGPUDriverBasics(t *testing.T) {
	requireGPU(t, 1)
	c, err := DeviceContext(0)
	if err != nil {
		t.Fatal(err)
	}
	dev := c.Device()
	name, _ := dev.Name()
	major, minor, _ := dev.ComputeCapability()
	v, _ := cuda.DriverVersion()
	uuid, _ := dev.UUID()
	t.Logf("device 0: %s, %s, sm_%d%d, driver CUDA %d", name, uuid, major, minor, v)

	const n = 1 << 20
	p, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(p)
	q, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(q)
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	if err := c.CopyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyDtoD(q, p, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := c.CopyDtoH(got, q); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("H2D, D2D, D2H round trip corrupted data")
	}

	// Pinned memory, a stream, async copies and events.
	h, err := c.HostAlloc(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	e0, _ := c.NewEvent(cuda.EventDefault)
	e1, _ := c.NewEvent(cuda.EventDefault)
	defer e0.Destroy()
	defer e1.Destroy()
	if err := s.MemsetAsync(q, 0x5a, n); err != nil {
		t.Fatal(err)
	}
	if err := e0.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoHAsync(h.Bytes(), q); err != nil {
		t.Fatal(err)
	}
	if err := e1.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := e1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Done(); !done || err != nil {
		t.Errorf("stream done after its last event: %v, %v", done, err)
	}
	el, err := cuda.Elapsed(e0, e1)
	if err != nil || el <= 0 {
		t.Errorf("elapsed: %v, %v", el, err)
	}
	if bytes.Count(h.Bytes(), []byte{0x5a}) != n {
		t.Error("memset + async D2H into pinned memory: wrong data")
	}

	// A batch of copies (CUDA 13 drivers): pieces of random bytes to the
	// device, in one call, then back into other places, in another.
	if cuda.BatchCopies() {
		hb := h.Bytes()
		for i := range n / 2 {
			hb[i] = byte(rand.Uint32())
		}
		clear(hb[n/2:])
		var b cuda.CopyBatch
		pieces := [][2]int{{0, 8}, {8, 4096}, {4104, 65536 + 3}, {n/2 - 100, 100}}
		for _, pc := range pieces {
			b.AddHtoD(q+cuda.DevicePtr(pc[0]), hb[pc[0]:pc[0]+pc[1]])
		}
		if err := s.CopyBatchAsync(&b); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		for _, pc := range pieces {
			b.AddDtoH(hb[n/2+pc[0]:n/2+pc[0]+pc[1]], q+cuda.DevicePtr(pc[0]))
		}
		if b.Len() != len(pieces) {
			t.Fatalf("batch holds %d copies, want %d", b.Len(), len(pieces))
		}
		if err := s.CopyBatchAsync(&b); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		for _, pc := range pieces {
			if !bytes.Equal(hb[pc[0]:pc[0]+pc[1]], hb[n/2+pc[0]:n/2+pc[0]+pc[1]]) {
				t.Errorf("batch copy of %d bytes at %d: wrong data", pc[1], pc[0])
			}
		}
	} else {
		t.Log("no cuMemcpyBatchAsync_v2 in this driver: batch copies not tested")
	}

	// Pointer queries: device, pinned host, ordinary Go memory.
	for _, c2 := range []struct {
		p    uintptr
		want cuda.MemoryType
	}{
		{uintptr(p), cuda.MemoryDevice},
		{uintptr(h.Ptr()), cuda.MemoryHost},
		{uintptr(unsafe.Pointer(&src[0])), cuda.MemoryUnknown},
	} {
		info, err := PointerInfo(c2.p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Type != c2.want || (c2.want != cuda.MemoryUnknown && info.Device != 0) {
			t.Errorf("PointerInfo(%#x) = %+v, want %v on device 0", c2.p, info, c2.want)
		}
	}

	// Errors name the call and the CUresult.
	_, err = c.MemAlloc(1 << 60)
	if err == nil || !strings.Contains(err.Error(), "cuMemAlloc_v2") || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("huge MemAlloc: %v", err)
	}
	if _, err := c.LoadModule([]byte("not ptx")); err == nil || !strings.Contains(err.Error(), "cuModuleLoadDataEx") {
		t.Errorf("LoadModule of garbage: %v", err)
	}
}

func TestGPUBufferAndPointerInfo(t *testing.T) {
	n := requireGPU(t, 1)
	for dev := 0; dev < n; dev++ {
		b, err := Alloc(dev, Int64, 1000)
		if err != nil {
			t.Fatal(err)
		}
		src := make([]int64, 1000)
		for i := range src {
			src[i] = int64(i)*1_000_000_007 - 5
		}
		if err := Upload(b, src); err != nil {
			t.Fatal(err)
		}
		got := make([]int64, 10)
		if err := Download(got, b.Slice(500, 510)); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != src[500+i] {
				t.Fatalf("device %d: element %d = %d, want %d", dev, 500+i, got[i], src[500+i])
			}
		}
		info, err := PointerInfo(b.Slice(3, 4).Ptr())
		if err != nil || !info.IsDevice() || int(info.Device) != dev {
			t.Errorf("PointerInfo of a buffer on device %d: %+v, %v", dev, info, err)
		}
		if err := b.Slice(1, 2).Free(); err == nil {
			t.Error("Free of a slice succeeded")
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
		if err := b.Free(); err == nil {
			t.Error("double Free succeeded")
		}
	}
}

// TestGPUReduce checks every kernel against the CPU on odd sizes, out of
// place, in place (dst = a and dst = b), and on unaligned buffers.
func TestGPUReduce(t *testing.T) {
	requireGPU(t, 1)
	if err := LoadKernels(0); err != nil {
		t.Fatal(err)
	}
	c, _ := DeviceContext(0)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, dt := range DTypes {
		for _, count := range []int{1, 7, 1000, 1000003} {
			// One element of slack so that Slice(1, count+1) misaligns.
			bufs := make([]Buffer, 3)
			for i := range bufs {
				if bufs[i], err = Alloc(0, dt, count+1); err != nil {
					t.Fatal(err)
				}
			}
			a, b := randomElements(rng, dt, count), randomElements(rng, dt, count)
			for _, op := range Ops {
				want := refReduce(op, dt, a, b)
				for _, mode := range []string{"out", "inplace-a", "inplace-b", "unaligned"} {
					lo := 0
					if mode == "unaligned" {
						lo = 1
					}
					A, B, D := bufs[0].Slice(lo, lo+count), bufs[1].Slice(lo, lo+count), bufs[2].Slice(lo, lo+count)
					must(t, A.CopyFromHost(a))
					must(t, B.CopyFromHost(b))
					must(t, c.Memset(bufs[2].DevicePtr(), 0xa5, bufs[2].Len())) // poison
					switch mode {
					case "inplace-a":
						D = A
					case "inplace-b":
						D = B
					}
					if err := Reduce(s, op, D, A, B); err != nil {
						t.Fatalf("%v %v n=%d %s: %v", op, dt, count, mode, err)
					}
					must(t, s.Synchronize())
					got := make([]byte, D.Len())
					must(t, D.CopyToHost(got))
					if !bytes.Equal(got, want) {
						bad := 0
						for bad < count && bytes.Equal(got[bad*dt.Size():(bad+1)*dt.Size()], want[bad*dt.Size():(bad+1)*dt.Size()]) {
							bad++
						}
						es := dt.Size()
						t.Errorf("%v %v n=%d %s: element %d: got % x, want % x (a % x, b % x)", op, dt, count, mode, bad,
							got[bad*es:(bad+1)*es], want[bad*es:(bad+1)*es], a[bad*es:(bad+1)*es], b[bad*es:(bad+1)*es])
					}
				}
			}
			for _, b := range bufs {
				must(t, b.Free())
			}
		}
	}
}

// TestGPUPeerCopyAndReduce copies between every GPU pair with peer access
// and runs a reduce whose second operand lives on the peer (a kernel reading
// over NVLink), as GPU collectives will.
func TestGPUPeerCopyAndReduce(t *testing.T) {
	n := requireGPU(t, 2)
	topo := Discover()
	const count = 1<<20 + 3
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			gi, gj := topo.ByCUDA(i), topo.ByCUDA(j)
			if gi == nil || gj == nil || topo.Links[gi.Index][gj.Index].Route == RouteHostStaging {
				t.Logf("devices %d-%d: no peer route", i, j)
				continue
			}
			must(t, EnablePeerAccess(i, j))
			a, err := Alloc(i, Float32, count)
			must(t, err)
			b, err := Alloc(j, Float32, count)
			must(t, err)
			d, err := Alloc(i, Float32, count)
			must(t, err)
			x, y := randomElements(rng, Float32, count), randomElements(rng, Float32, count)
			must(t, a.CopyFromHost(x))
			must(t, b.CopyFromHost(y))
			ci, _ := DeviceContext(i)
			s, err := ci.NewStream()
			must(t, err)
			must(t, Reduce(s, Sum, d, a, b)) // b read from device j
			must(t, s.Synchronize())
			got := make([]byte, d.Len())
			must(t, d.CopyToHost(got))
			if !bytes.Equal(got, refReduce(Sum, Float32, x, y)) {
				t.Errorf("reduce on device %d reading device %d: wrong result", i, j)
			}
			// Peer copy a (device i) -> b (device j) on device i's stream.
			must(t, s.CopyAsync(b.DevicePtr(), a.DevicePtr(), a.Len()))
			must(t, s.Synchronize())
			must(t, b.CopyToHost(got))
			if !bytes.Equal(got, x) {
				t.Errorf("peer copy %d -> %d: wrong data", i, j)
			}
			must(t, s.Destroy())
			for _, buf := range []Buffer{a, b, d} {
				must(t, buf.Free())
			}
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
