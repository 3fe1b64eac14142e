package gpu

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/gpu/kernels"
)

// Tests that need no GPU: they run everywhere, CI included.

func TestDTypes(t *testing.T) {
	sizes := map[DType]int{Float32: 4, Float64: 8, Float16: 2, BFloat16: 2, Int32: 4, Int64: 8, Uint8: 1}
	for _, dt := range DTypes {
		if dt.Size() != sizes[dt] {
			t.Errorf("%v.Size() = %d, want %d", dt, dt.Size(), sizes[dt])
		}
		got, err := ParseDType(dt.String())
		if err != nil || got != dt {
			t.Errorf("ParseDType(%q) = %v, %v", dt.String(), got, err)
		}
	}
	if DType(0).Valid() || DType(0).Size() != 0 {
		t.Error("zero DType is valid")
	}
	if _, err := ParseDType("complex64"); err == nil {
		t.Error("ParseDType accepted complex64")
	}
	if DTypeOf[float32]() != Float32 || DTypeOf[uint8]() != Uint8 || DTypeOf[uint16]() != 0 {
		t.Error("DTypeOf is wrong")
	}
}

// TestEmbeddedPTX checks that the embedded PTX defines every reduce kernel
// and every allreduce push kernel
// and targets a PTX ISA the H200 driver JIT-compiles (GPU tests load it).
func TestEmbeddedPTX(t *testing.T) {
	entries := kernels.Entries(kernels.ReducePTX)
	for _, op := range Ops {
		for _, dt := range DTypes {
			name := kernels.ReduceName(op.String(), dt.kernelName())
			if !slices.Contains(entries, name) {
				t.Errorf("embedded reduce.ptx lacks %s; regenerate it (docs/gpu.md)", name)
			}
			if name := kernels.AllreducePushName(op.String(), dt.kernelName()); !slices.Contains(entries, name) {
				t.Errorf("embedded reduce.ptx lacks %s; regenerate it (docs/gpu.md)", name)
			}
		}
	}
	if !bytes.Contains(kernels.ReducePTX, []byte(".target sm_80")) {
		t.Errorf("embedded reduce.ptx does not target sm_80 (compute_80)")
	}
}

func TestCPUList(t *testing.T) {
	for _, s := range []string{"0", "0-63", "0-31,64-95", "1,3,5-7"} {
		cpus, err := parseCPUList(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatCPUList(cpus); got != s {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
	if _, err := parseCPUList("3-1"); err == nil {
		t.Error("parseCPUList accepted 3-1")
	}
	if got := formatCPUList(cpusOfMask([]uint{0xf0, 1})); got != "4-7,64" {
		t.Errorf("cpusOfMask: %s", got)
	}
	if formatCPUList(nil) != "N/A" {
		t.Error("empty list is not N/A")
	}
}

func TestCanonicalBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0":     "0000:18:00.0",
		"0000:AB:00.0":         "0000:ab:00.0",
		"00000001:18:00.0\x00": "0001:18:00.0",
	} {
		if got := canonicalBusID(in); got != want {
			t.Errorf("canonicalBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathBetween(t *testing.T) {
	ch := func(root string, bdfs ...string) pciChain { return pciChain{root: root, bdfs: bdfs} }
	sw := []string{"0000:00:01.0", "0000:01:00.0"} // root port, switch upstream port
	cases := []struct {
		a, b   pciChain
		na, nb int
		want   PCIePath
	}{
		{ch("pci0000:00", "0000:00:01.0", "0000:02:00.0"), ch("pci0000:00", "0000:00:01.0", "0000:02:00.0"), 0, 0, PathSelf},
		{ch("pci0000:00", append(sw, "0000:02:00.0", "0000:03:00.0")...), ch("pci0000:00", append(sw, "0000:02:01.0", "0000:04:00.0")...), 0, 0, PathPIX},
		{ch("pci0000:00", "0000:00:01.0", "0000:02:00.0"), ch("pci0000:00", "0000:00:01.0", "0000:02:00.1"), 0, 0, PathPIX},
		{ch("pci0000:00", append(sw, "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0")...), ch("pci0000:00", append(sw, "0000:02:01.0", "0000:06:00.0")...), 0, 0, PathPXB},
		{ch("pci0000:00", "0000:00:01.0", "0000:02:00.0"), ch("pci0000:00", "0000:00:02.0", "0000:03:00.0"), 0, 0, PathPHB},
		{ch("pci0000:00", "0000:00:01.0"), ch("pci0000:80", "0000:80:01.0"), 0, 0, PathNode},
		{ch("pci0000:00", "0000:00:01.0"), ch("pci0000:80", "0000:80:01.0"), -1, 1, PathNode},
		{ch("pci0000:00", "0000:00:01.0"), ch("pci0000:80", "0000:80:01.0"), 0, 1, PathSys},
		{ch("pci0000:00"), ch("pci0000:00", "0000:00:01.0"), 0, 0, PathUnknown},
	}
	for i, c := range cases {
		if got := pathBetween(c.a, c.b, c.na, c.nb); got != c.want {
			t.Errorf("case %d: pathBetween = %v, want %v", i, got, c.want)
		}
	}
}

// fakeSysfs builds a sysfs tree with an RDMA NIC and its netdev under one
// switch with a GPU, an Ethernet NIC on another root, and a virtual
// interface.
func fakeSysfs(t *testing.T) string {
	root := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		mk(filepath.Dir(name))
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	sw := "devices/pci0000:00/0000:00:01.0/0000:01:00.0"
	gpu := mk(sw + "/0000:02:00.0/0000:03:00.0")
	ib := mk(sw + "/0000:02:01.0/0000:04:00.0")
	eth := mk("devices/pci0000:80/0000:80:02.0/0000:81:00.0")
	mk("devices/pci0000:80/0000:80:02.0/0000:81:00.0/net/eno1")
	mk(sw + "/0000:02:01.0/0000:04:00.0/net/ib0")
	mk("devices/virtual/net/lo")
	write(gpu[len(root)+1:]+"/numa_node", "0\n")
	write(gpu[len(root)+1:]+"/local_cpulist", "0-15\n")
	write(ib[len(root)+1:]+"/numa_node", "0\n")
	write(eth[len(root)+1:]+"/numa_node", "1\n")
	for _, d := range []string{gpu, ib, eth} {
		link(d[len(root)+1:], "bus/pci/devices/"+filepath.Base(d))
	}
	link(ib[len(root)+1:], "class/infiniband/mlx5_0/device")
	mk("class/infiniband/mlx5_0/ports/1")
	write("class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n")
	link(ib[len(root)+1:]+"/net/ib0", "class/net/ib0")
	link(ib[len(root)+1:], "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0/net/ib0/device")
	link(eth[len(root)+1:]+"/net/eno1", "class/net/eno1")
	link(eth[len(root)+1:], "devices/pci0000:80/0000:80:02.0/0000:81:00.0/net/eno1/device")
	write("devices/pci0000:80/0000:80:02.0/0000:81:00.0/net/eno1/speed", "25000\n")
	link("devices/virtual/net/lo", "class/net/lo")
	return root
}

func TestNICsFromFakeSysfs(t *testing.T) {
	old := sysfs
	sysfs = fakeSysfs(t)
	defer func() { sysfs = old }()

	nics := discoverNICs()
	if len(nics) != 2 {
		t.Fatalf("found %d NICs, want 2: %+v", len(nics), nics)
	}
	ib, eth := nics[0], nics[1]
	if ib.Name != "mlx5_0" || !ib.RDMA || ib.PCIBusID != "0000:04:00.0" || ib.NUMANode != 0 || ib.SpeedMbps != 400000 || !slices.Equal(ib.NetDevs, []string{"ib0"}) {
		t.Errorf("RDMA NIC: %+v", ib)
	}
	if eth.Name != "eno1" || eth.RDMA || eth.PCIBusID != "0000:81:00.0" || eth.NUMANode != 1 || eth.SpeedMbps != 25000 {
		t.Errorf("Ethernet NIC: %+v", eth)
	}
	topo := &Topology{NICs: nics, GPUs: []GPU{{PCIBusID: "0000:03:00.0", NUMANode: 0}}}
	placeNICs(topo)
	g := topo.GPUs[0]
	if g.NICPaths[0] != PathPIX || g.NICPaths[1] != PathSys || g.NearestNIC != 0 {
		t.Errorf("GPU placement: paths %v, nearest %d; want [PIX SYS], 0", g.NICPaths, g.NearestNIC)
	}
	if cpus := pciLocalCPUs("0000:03:00.0"); formatCPUList(cpus) != "0-15" {
		t.Errorf("local CPUs: %v", cpus)
	}
}

func TestWriteTopologyMatrix(t *testing.T) {
	old := sysfs
	sysfs = fakeSysfs(t)
	defer func() { sysfs = old }()
	topo := &Topology{
		NICs:   discoverNICs(),
		Driver: "580.159.04",
		GPUs: []GPU{
			{Index: 0, CUDA: 0, Name: "NVIDIA H200", PCIBusID: "0000:03:00.0", NUMANode: 0, CPUAffinity: []int{0, 1, 2, 3}},
			{Index: 1, CUDA: 1, Name: "NVIDIA H200", PCIBusID: "0000:05:00.0", NUMANode: 0, CPUAffinity: []int{0, 1, 2, 3}},
		},
		Links: newLinks(2),
	}
	topo.Links[0][1] = Link{NVLinks: 18, NVLinkGBps: 26.562, NVSwitch: true, PCIe: PathSys, PeerAccess: true}
	topo.Links[1][0] = Link{PCIe: PathSys}
	for i := range topo.Links {
		for j := range topo.Links {
			if i != j {
				topo.Links[i][j].Route = topo.Links[i][j].route()
			}
		}
	}
	placeNICs(topo)
	var buf bytes.Buffer
	if err := WriteTopology(&buf, TopoOptions{Topology: topo}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{"GPU0", "NV18", "NIC0", "CPU Affinity", "0-3", "mlx5_0",
		"GPU0 <-> GPU1: NVLink peer copy (18 NVLinks via NVSwitch x 26.6 GB/s = 478 GB/s per direction)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if topo.Route(1, 0) != RouteHostStaging || topo.Route(0, 1) != RouteNVLinkPeer {
		t.Errorf("routes: %v %v", topo.Route(0, 1), topo.Route(1, 0))
	}
}

// TestNoGPU checks the path every machine without a GPU takes: discovery
// says "no GPU" with a reason, and GPU calls fail with ErrNoGPU.
func TestNoGPU(t *testing.T) {
	if ok, _ := Available(); ok {
		t.Skip("this machine has a GPU; the no-GPU path is tested where there is none")
	}
	topo := Discover()
	if len(topo.GPUs) != 0 || topo.NoGPU == "" {
		t.Fatalf("Discover on a machine without GPU: %d GPUs, NoGPU %q", len(topo.GPUs), topo.NoGPU)
	}
	if err := topo.Err(); !errors.Is(err, ErrNoGPU) {
		t.Errorf("Topology.Err() = %v, want ErrNoGPU", err)
	}
	var buf bytes.Buffer
	if err := WriteTopology(&buf, TopoOptions{Topology: topo, Probe: true}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	if !strings.HasPrefix(buf.String(), "no GPU: ") {
		t.Errorf("WriteTopology printed %q", buf.String())
	}
	if _, err := Alloc(0, Float32, 10); !errors.Is(err, ErrNoGPU) {
		t.Errorf("Alloc without GPU: %v, want ErrNoGPU", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrNoGPU) {
		t.Errorf("DeviceCount without GPU: %v, want ErrNoGPU", err)
	}
	if err := LoadKernels(0); !errors.Is(err, ErrNoGPU) {
		t.Errorf("LoadKernels without GPU: %v, want ErrNoGPU", err)
	}
	if info, err := PointerInfo(0x1000); err != nil || info.IsDevice() {
		t.Errorf("PointerInfo without GPU: %+v, %v", info, err)
	}
	if err := cuda.Init(); !cuda.IsNoGPU(err) {
		t.Errorf("cuda.Init without GPU: %v", err)
	}
}

func TestBufferValues(t *testing.T) {
	b := Wrap(2, 0x10000, Float64, 100)
	if b.Device() != 2 || b.Ptr() != 0x10000 || b.Len() != 800 || b.Count() != 100 || b.DType() != Float64 {
		t.Fatalf("Wrap: %v", b)
	}
	s := b.Slice(10, 20)
	if s.Ptr() != 0x10000+80 || s.Count() != 10 || s.Len() != 80 {
		t.Errorf("Slice: %v", s)
	}
	if err := b.Free(); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Free of wrapped memory: %v", err)
	}
	if err := (Buffer{}).Free(); err != nil {
		t.Errorf("Free of the zero Buffer: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Slice out of range did not panic")
		}
	}()
	b.Slice(50, 101)
}

func TestReduceArgumentChecks(t *testing.T) {
	a := Wrap(0, 0x10000, Float32, 10)
	for name, err := range map[string]error{
		"op":     Reduce(nil, Op(0), a, a, a),
		"dtype":  Reduce(nil, Sum, a, a, Wrap(0, 0x20000, Int32, 10)),
		"length": Reduce(nil, Sum, a, a, Wrap(0, 0x20000, Float32, 9)),
	} {
		if err == nil {
			t.Errorf("Reduce with a bad %s succeeded", name)
		}
	}
	if err := Reduce(nil, Sum, Buffer{dt: Float32}, Buffer{dt: Float32}, Buffer{dt: Float32}); err != nil {
		t.Errorf("Reduce of nothing: %v", err)
	}
}

func TestIPCHandleBinary(t *testing.T) {
	h := IPCHandle{Offset: 4096, Bytes: 1 << 30, DType: BFloat16}
	for i := range h.Mem {
		h.Mem[i] = byte(i * 7)
	}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g IPCHandle
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if g != h {
		t.Errorf("round trip: %+v, want %+v", g, h)
	}
	if err := g.UnmarshalBinary(b[:10]); err == nil {
		t.Error("short handle accepted")
	}
}

func TestParams(t *testing.T) {
	for _, p := range Params() {
		if !strings.HasPrefix(p.Name, "GORUN_GPU_") || p.Doc == "" {
			t.Errorf("param %+v", p)
		}
	}
}
