package boot

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
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

// fakeDriver makes a /proc/driver/nvidia/gpus and /dev with the given
// GPUs (bus id, UUID, model, minor) and points the package at them.
func fakeDriver(t *testing.T, gpus [][4]string, noDev ...string) {
	t.Helper()
	root := t.TempDir()
	oldProc, oldDev := procNVIDIAGPU, devDir
	t.Cleanup(func() { procNVIDIAGPU, devDir = oldProc, oldDev })
	procNVIDIAGPU, devDir = filepath.Join(root, "proc"), filepath.Join(root, "dev")
	os.MkdirAll(procNVIDIAGPU, 0o755)
	os.MkdirAll(devDir, 0o755)
	for _, g := range gpus {
		// The layout of the driver's file (r580), tabs included.
		writeFile(t, filepath.Join(procNVIDIAGPU, g[0], "information"),
			"Model: \t\t "+g[2]+"\nIRQ:   \t\t 0\nGPU UUID: \t "+g[1]+"\nVideo BIOS: \t ??.??.??.??.??\n"+
				"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t "+g[0]+
				"\nDevice Minor: \t "+g[3]+"\nGPU Excluded:\t No\n")
		if !slices.Contains(noDev, g[3]) {
			writeFile(t, filepath.Join(devDir, "nvidia"+g[3]), "")
		}
	}
}

func TestVisibleGPUs(t *testing.T) {
	const h = "NVIDIA H100 80GB HBM3"
	// The driver's directory order is not the bus order; minors are not
	// either.
	fakeDriver(t, [][4]string{
		{"0000:9a:00.0", "GPU-9a9a9a9a-0000-0000-0000-000000000002", h, "2"},
		{"0000:18:00.0", "GPU-18181818-0000-0000-0000-000000000000", h, "1"},
		{"0000:3b:00.0", "GPU-3b3b3b3b-0000-0000-0000-000000000001", h, "0"},
		{"0000:db:00.0", "GPU-dbdbdbdb-0000-0000-0000-000000000003", h, "3"},
	})
	all := []string{"0000:18:00.0", "0000:3b:00.0", "0000:9a:00.0", "0000:db:00.0"}
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
		{"1,1,2", true, all[1:3]},
		{"GPU-dbdbdbdb-0000-0000-0000-000000000003,0", true, []string{all[3], all[0]}},
		{"GPU-3b3b", true, all[1:2]}, // a unique prefix
		{"GPU-", true, nil},          // not unique
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
	const h = "NVIDIA H200"
	fakeDriver(t, [][4]string{
		{"0000:18:00.0", "GPU-a", h, "0"},
		{"0000:3b:00.0", "GPU-b", h, "1"},
		{"0000:9a:00.0", "GPU-c", h, "2"},
	}, "1")
	if got, want := visibleGPUs("", false, ""), []string{"0000:18:00.0", "0000:9a:00.0"}; !slices.Equal(got, want) {
		t.Errorf("without /dev/nvidia1: %v, want %v", got, want)
	}
	if got, want := visibleGPUs("1", true, ""), []string{"0000:9a:00.0"}; !slices.Equal(got, want) {
		t.Errorf("CUDA_VISIBLE_DEVICES=1 without /dev/nvidia1: %v, want %v", got, want)
	}
}

func TestVisibleGPUsMixedModels(t *testing.T) {
	fakeDriver(t, [][4]string{
		{"0000:18:00.0", "GPU-a", "NVIDIA A100-SXM4-40GB", "0"},
		{"0000:3b:00.0", "GPU-b", "NVIDIA H100 80GB HBM3", "1"},
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

// BenchmarkPlacement is what Init pays for its placement (no NVML, no
// CUDA): ~105 µs on the 2-core dev VM for a local job (loopback, no GPU):
// half the affinity and the NUMA nodes' cpulists, half the interface
// list. Against ~230 ms for gorun -np 8 hello, it does not show.
func BenchmarkPlacement(b *testing.B) {
	e := &Env{LocalRank: 0, LocalSize: 1, BindAddr: "127.0.0.1"}
	for b.Loop() {
		e.Placement()
	}
}
