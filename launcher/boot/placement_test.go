package boot

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun/gorun/gpu"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestNUMAOf(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "node0/cpulist"), "0-3,8-11\n")
	writeFile(t, filepath.Join(dir, "node1/cpulist"), "4-7,12-15\n")
	writeFile(t, filepath.Join(dir, "node2/cpulist"), "\n") // memory only (CXL)
	writeFile(t, filepath.Join(dir, "online"), "0-2\n")
	for _, c := range []struct {
		cpus []int
		want int
	}{
		{[]int{0}, 0},
		{[]int{0, 1, 2, 3, 8, 9, 10, 11}, 0},
		{[]int{5}, 1},
		{[]int{12, 15}, 1},
		{[]int{3, 4}, -1},   // spans nodes: unbound
		{[]int{0, 16}, -1},  // a CPU no node lists
		{nil, -1},           // nothing allowed: unknown
		{[]int{99}, -1},     // a CPU no node lists
		{[]int{7, 4, 6}, 1}, // any order
	} {
		if got := numaOf(c.cpus, dir); got != c.want {
			t.Errorf("numaOf(%v) = %d, want %d", c.cpus, got, c.want)
		}
	}
	if got := numaOf([]int{0}, filepath.Join(dir, "missing")); got != -1 {
		t.Errorf("numaOf without sysfs = %d, want -1", got)
	}
}

func TestInCPUList(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		list string
		want bool
	}{
		{[]int{0}, "0", true},
		{[]int{1}, "0", false},
		{[]int{5, 9}, "0-5,9", true},
		{[]int{6}, "0-5,9", false},
		{[]int{0}, "", false},
		{[]int{0}, "0-x", false},
		{[]int{0}, "a", false},
	} {
		if got := inCPUList(c.cpus, c.list); got != c.want {
			t.Errorf("inCPUList(%v, %q) = %v, want %v", c.cpus, c.list, got, c.want)
		}
	}
}

// fakeGPU is a GPU of fakeDriver.
type fakeGPU struct {
	bus, uuid, device, minor string // device: the PCI device id ("0x2335")
	noDev                    bool   // no /dev/nvidia<minor>
}

// fakeDriver makes a /proc/driver/nvidia/gpus, the GPUs' sysfs PCI
// directories and /dev with the given GPUs, and points the package at them.
func fakeDriver(t *testing.T, gpus []fakeGPU) {
	t.Helper()
	root := t.TempDir()
	oldProc, oldPCI, oldDev := procNVIDIAGPU, sysPCIDir, devDir
	t.Cleanup(func() { procNVIDIAGPU, sysPCIDir, devDir = oldProc, oldPCI, oldDev })
	procNVIDIAGPU, sysPCIDir, devDir = filepath.Join(root, "proc"), filepath.Join(root, "pci"), filepath.Join(root, "dev")
	os.MkdirAll(procNVIDIAGPU, 0o755)
	os.MkdirAll(devDir, 0o755)
	for _, g := range gpus {
		// The layout of the driver's file (r580), tabs included.
		writeFile(t, filepath.Join(procNVIDIAGPU, g.bus, "information"),
			"Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t "+g.uuid+"\nVideo BIOS: \t 96.00.a5.00.1a\n"+
				"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t "+g.bus+
				"\nDevice Minor: \t "+g.minor+"\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n")
		writeFile(t, filepath.Join(sysPCIDir, g.bus, "device"), g.device+"\n")
		if !g.noDev {
			writeFile(t, filepath.Join(devDir, "nvidia"+g.minor), "")
		}
	}
}

func TestVisibleGPUs(t *testing.T) {
	const h100 = "0x2330"
	// The driver's directory order is not the bus order; minors are not
	// either.
	fakeDriver(t, []fakeGPU{
		{"0000:9a:00.0", "GPU-9a9a9a9a-0000-0000-0000-000000000002", h100, "2", false},
		{"0000:18:00.0", "GPU-18181818-0000-0000-0000-000000000000", h100, "1", false},
		{"0000:3b:00.0", "GPU-3b3b3b3b-0000-0000-0000-000000000001", h100, "0", false},
		{"0000:db:00.0", "GPU-dbdbdbdb-0000-0000-0000-000000000003", h100, "3", false},
	})
	all := []string{"0000:18:00.0", "0000:3b:00.0", "0000:9a:00.0", "0000:db:00.0"}
	// How CUDA 13 read CUDA_VISIBLE_DEVICES on the 2xH200 host
	// (TestVisibleGPUsMatchCUDA), on four GPUs.
	for _, c := range []struct {
		visible string
		set     bool
		want    []string
	}{
		{"", false, all},
		{"", true, nil},
		{"0", true, all[:1]},
		{"3,1", true, []string{all[3], all[1]}},
		{" 2 , 0 ", true, []string{all[2], all[0]}},
		{"1,7,2", true, all[1:2]},  // the list ends at an index that names no GPU
		{"1,-1,2", true, all[1:2]}, // and at -1
		{"-1", true, nil},
		{"1,1,2", true, nil}, // a repeated GPU hides them all
		{"2,0,2", true, nil},
		{"GPU-dbdbdbdb-0000-0000-0000-000000000003,GPU-18181818-0000-0000-0000-000000000000", true, []string{all[3], all[0]}},
		{"GPU-3b3b", true, all[1:2]}, // a unique prefix
		{"GPU-3b3b,GPU-9a", true, all[1:3]},
		{"GPU-3b3b,GPU-", true, all[1:2]}, // not unique: the list ends
		{"GPU-,0", true, nil},
		{"GPU-3b3b,0", true, all[1:2]}, // kinds do not mix
		{"0,GPU-3b3b", true, all[:1]},
		{"3b3b3b3b-0000-0000-0000-000000000001", true, nil}, // no GPU- prefix
		{"MIG-0b1c2d3e-0000-0000-0000-000000000000", true, nil},
		{"x", true, nil},
	} {
		got := visibleGPUs(c.visible, c.set, "")
		if !slices.Equal(got, c.want) {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q (set %v): %v, want %v", c.visible, c.set, got, c.want)
		}
	}
}

func TestVisibleGPUsDeviceNodes(t *testing.T) {
	// A GPU whose /dev node this process cannot open is not CUDA's: the
	// indices of CUDA_VISIBLE_DEVICES skip it.
	const h200 = "0x2335"
	fakeDriver(t, []fakeGPU{
		{"0000:18:00.0", "GPU-a", h200, "0", false},
		{"0000:3b:00.0", "GPU-b", h200, "1", true},
		{"0000:9a:00.0", "GPU-c", h200, "2", false},
	})
	if got, want := visibleGPUs("", false, ""), []string{"0000:18:00.0", "0000:9a:00.0"}; !slices.Equal(got, want) {
		t.Errorf("without /dev/nvidia1: %v, want %v", got, want)
	}
	if got, want := visibleGPUs("1", true, ""), []string{"0000:9a:00.0"}; !slices.Equal(got, want) {
		t.Errorf("CUDA_VISIBLE_DEVICES=1 without /dev/nvidia1: %v, want %v", got, want)
	}
}

// TestVisibleGPUsNoInformation: with every device node there and no UUID
// to match, the information files (a driver call each) are not read.
func TestVisibleGPUsNoInformation(t *testing.T) {
	const h200 = "0x2335"
	fakeDriver(t, []fakeGPU{
		{"0000:18:00.0", "GPU-a", h200, "0", false},
		{"0000:3b:00.0", "GPU-b", h200, "1", false},
	})
	for _, bus := range []string{"0000:18:00.0", "0000:3b:00.0"} {
		if err := os.Remove(filepath.Join(procNVIDIAGPU, bus, "information")); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := visibleGPUs("1,0", true, ""), []string{"0000:3b:00.0", "0000:18:00.0"}; !slices.Equal(got, want) {
		t.Errorf("CUDA_VISIBLE_DEVICES=1,0: %v, want %v", got, want)
	}
	if got := visibleGPUs("GPU-a", true, ""); got != nil {
		t.Errorf("a UUID without information files: %v, want none", got)
	}
}

func TestVisibleGPUsMixedModels(t *testing.T) {
	fakeDriver(t, []fakeGPU{
		{"0000:18:00.0", "GPU-a", "0x20b0", "0", false}, // A100
		{"0000:3b:00.0", "GPU-b", "0x2330", "1", false}, // H100
	})
	// CUDA's default order puts the fastest first: not ours to guess.
	if got := visibleGPUs("", false, ""); got != nil {
		t.Errorf("mixed models, FASTEST_FIRST: %v, want none (unknown)", got)
	}
	if got, want := visibleGPUs("1", true, "PCI_BUS_ID"), []string{"0000:3b:00.0"}; !slices.Equal(got, want) {
		t.Errorf("mixed models, PCI_BUS_ID, CUDA_VISIBLE_DEVICES=1: %v, want %v", got, want)
	}
}

func TestVisibleGPUsNoDriver(t *testing.T) {
	fakeDriver(t, nil)
	if got := visibleGPUs("", false, ""); got != nil {
		t.Errorf("no GPU: %v", got)
	}
	os.RemoveAll(procNVIDIAGPU)
	if got := visibleGPUs("0", true, ""); got != nil {
		t.Errorf("no driver: %v", got)
	}
}

func TestBindNIC(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	var lo string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			lo = ifc.Name
		}
	}
	if lo == "" {
		t.Skip("no loopback interface")
	}
	if got := bindNIC("127.0.0.1"); !slices.Equal(got, []string{lo}) {
		t.Errorf("127.0.0.1: %v, want [%s]", got, lo)
	}
	for _, a := range []string{"", "0.0.0.0", "::", "not an address", "192.0.2.77"} { // 192.0.2/24: TEST-NET-1
		if got := bindNIC(a); got != nil {
			t.Errorf("%q: %v, want none", a, got)
		}
	}
	// Every address of an up interface names that interface.
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
				continue
			}
			if got := bindNIC(n.IP.String()); !slices.Equal(got, []string{ifc.Name}) {
				t.Errorf("%s: %v, want [%s]", n.IP, got, ifc.Name)
			}
		}
	}
}

// TestPlacementHere: this process's own placement is consistent with the
// host: its NUMA node holds its CPUs.
func TestPlacementHere(t *testing.T) {
	e := &Env{LocalRank: 2, LocalSize: 3, BindAddr: "127.0.0.1"}
	p := e.Placement()
	if p.LocalRank != 2 || p.LocalSize != 3 {
		t.Errorf("placement %+v: local rank and size not from the env", p)
	}
	if len(p.NICs) != 1 {
		t.Errorf("placement %+v: want the loopback NIC", p)
	}
	nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	if len(nodes) == 1 && p.NUMA != 0 {
		t.Errorf("one NUMA node here, placement says %d", p.NUMA)
	}
	t.Logf("placement here: %+v", p)
}

// TestVisibleGPUsMatchCUDA: on a GPU host, the driver's files give the
// bus ids CUDA gives, in CUDA's order, under this process's
// CUDA_VISIBLE_DEVICES (run it with several). Discovery initialises NVML
// and CUDA, which Init never does.
func TestVisibleGPUsMatchCUDA(t *testing.T) {
	if _, err := os.Stat(procNVIDIAGPU); err != nil {
		t.Skip("no NVIDIA driver")
	}
	topo := gpu.Discover()
	var byOrdinal []gpu.GPU
	for _, g := range topo.GPUs {
		if g.CUDA >= 0 {
			byOrdinal = append(byOrdinal, g)
		}
	}
	// CUDA_VISIBLE_DEVICES can hide every GPU from CUDA (NVML still
	// lists them): then the driver files must give none either.
	hidden := len(topo.GPUs) > 0 && slices.ContainsFunc(topo.Warnings, func(w string) bool { return strings.Contains(w, "CUDA_ERROR_NO_DEVICE") })
	if len(byOrdinal) == 0 && !hidden {
		t.Skipf("CUDA unavailable: %s %v", topo.NoGPU, topo.Warnings)
	}
	slices.SortFunc(byOrdinal, func(a, b gpu.GPU) int { return a.CUDA - b.CUDA })
	var want []string
	for _, g := range byOrdinal {
		want = append(want, g.PCIBusID)
	}
	vis, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	got := visibleGPUs(vis, set, os.Getenv("CUDA_DEVICE_ORDER"))
	t.Logf("CUDA_VISIBLE_DEVICES=%q (set %v): driver files %v, CUDA %v", vis, set, got, want)
	if !slices.Equal(got, want) {
		t.Errorf("driver files give %v, CUDA %v", got, want)
	}
}

// BenchmarkPlacement is what Init pays for its placement (no NVML, no
// CUDA), for a local job (loopback): ~105 µs on the 2-core dev VM (no
// GPU), ~95 µs on the 2xH200 host (GPUs ~28 µs of it, the rest about
// equally the affinity with the NUMA nodes' cpulists and the interface
// list). Against ~200 ms for gorun -np 8 hello here and ~19 ms there, it
// does not show.
func BenchmarkPlacement(b *testing.B) {
	e := &Env{LocalRank: 0, LocalSize: 1, BindAddr: "127.0.0.1"}
	for b.Loop() {
		e.Placement()
	}
}
