package boot

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Placement is where a rank runs, as its business card carries it: package
// mpi hands it to the transports as btl.Placement (boot may not import
// btl), whose doc says what each field means. The msgpack names are short
// because the card must fit memberlist's 512 bytes of node metadata.
type Placement struct {
	LocalRank int      `msgpack:"lr"`
	LocalSize int      `msgpack:"ls"`
	NUMA      int      `msgpack:"nu"`
	GPUs      []string `msgpack:"g,omitempty"`
	NICs      []string `msgpack:"n,omitempty"`
}

// Where the kernel and the NVIDIA driver describe the host; variables so
// that tests can point them at a fake tree.
var (
	sysNodeDir    = "/sys/devices/system/node"
	sysPCIDir     = "/sys/bus/pci/devices"
	procNVIDIAGPU = "/proc/driver/nvidia/gpus"
	devDir        = "/dev"
)

// Placement finds this rank's placement: local rank and size from gorun's
// environment, the NUMA node from the CPU affinity, the NIC that holds
// BindAddr and the GPUs the driver lists (see doc.go for why from there).
// It reads a few files of /sys and /proc and asks the kernel for the
// interfaces, and never initialises NVML or CUDA. Init calls it once.
func (e *Env) Placement() Placement {
	vis, visSet := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	return Placement{
		LocalRank: e.LocalRank,
		LocalSize: e.LocalSize,
		NUMA:      affinityNUMA(),
		GPUs:      visibleGPUs(vis, visSet, os.Getenv("CUDA_DEVICE_ORDER")),
		NICs:      bindNIC(e.BindAddr),
	}
}

// affinityNUMA is the NUMA node that holds every CPU this process may run
// on, or -1 when they span nodes or that cannot be told.
func affinityNUMA() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1 // more CPUs than a CPUSet holds (1024): unknown
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return numaOf(cpus, sysNodeDir)
}

// numaOf is the node of dir (a /sys/devices/system/node) whose cpulist
// holds every CPU of cpus, or -1.
func numaOf(cpus []int, dir string) int {
	if len(cpus) == 0 {
		return -1
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, "node[0-9]*"))
	for _, n := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n, "cpulist"))
		if err != nil {
			continue
		}
		if inCPUList(cpus, strings.TrimSpace(string(b))) {
			return id
		}
	}
	return -1
}

// inCPUList reports whether every CPU of cpus is in list, in the kernel's
// list format ("0-3,8,10-11"). A malformed list holds nothing.
func inCPUList(cpus []int, list string) bool {
	if list == "" {
		return false
	}
	type span struct{ lo, hi int }
	var spans []span
	for _, part := range strings.Split(list, ",") {
		a, b, isRange := strings.Cut(part, "-")
		lo, err := strconv.Atoi(a)
		if err != nil {
			return false
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(b); err != nil {
				return false
			}
		}
		spans = append(spans, span{lo, hi})
	}
	for _, c := range cpus {
		if !slices.ContainsFunc(spans, func(s span) bool { return s.lo <= c && c <= s.hi }) {
			return false
		}
	}
	return true
}

// bindNIC is the interface that holds addr (the rank's BindAddr), as a
// list of at most one name; empty when addr is empty, unspecified or on no
// interface.
func bindNIC(addr string) []string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	if ip.IsLoopback() {
		// A local job binds 127.0.0.1: the loopback interface holds it
		// (all of 127/8 is routed there), no address list needed.
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagLoopback != 0 {
				return []string{ifc.Name}
			}
		}
		return nil
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return []string{ifc.Name}
			}
		}
	}
	return nil
}

// driverGPU is one GPU the NVIDIA driver lists.
type driverGPU struct {
	bus string // PCI bus id, the name of its /proc directory
	// uuid, minor and excluded come from its information file, read only
	// when needed (see visibleGPUs).
	uuid, minor string
	excluded    bool
}

// visibleGPUs lists the PCI bus ids of the GPUs CUDA will show this
// process, in CUDA's order: the GPUs the driver lists in
// /proc/driver/nvidia/gpus that this process may open, in PCI bus order,
// selected and ordered by CUDA_VISIBLE_DEVICES when it is set, read as
// CUDA reads it (measured against CUDA 13 on the lent 2xH200 host): a list
// of indices or of GPU UUIDs (or unique prefixes of them), which ends at
// the first entry that names no GPU or is of the other kind; a repeated
// GPU, or an empty list, hides every GPU.
//
// CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) is PCI bus order
// when the GPUs are all of one model (one PCI device id); on a host with
// several models it is CUDA's to tell, and the list is empty (unknown)
// unless CUDA_DEVICE_ORDER=PCI_BUS_ID. MIG instances are not resolved to
// their GPU: a list that names one ends there.
//
// Reading a GPU's information file costs the driver a call into the GPU
// (~170 µs per GPU on the 2xH200 host; gorun -np 8 hello took 1.4 ms
// longer there, median of 40, when every rank read them), so the common
// case does without: the directory listing gives
// the bus ids, sysfs the device ids, and the device nodes /dev/nvidia0..N-1
// all there and open to us mean every listed GPU is usable. Only UUIDs in
// CUDA_VISIBLE_DEVICES, or missing device nodes (a GPU excluded by the
// driver, a container that hides some), make it read the files, for the
// UUIDs and for which minor (device node) each GPU has.
func visibleGPUs(visible string, visibleSet bool, order string) []string {
	ents, err := os.ReadDir(procNVIDIAGPU)
	if err != nil || len(ents) == 0 {
		return nil
	}
	var toks []string
	byUUID := false
	if visibleSet {
		for _, t := range strings.Split(visible, ",") {
			toks = append(toks, strings.TrimSpace(t))
		}
		byUUID = strings.HasPrefix(toks[0], "GPU-")
	}
	gpus := make([]driverGPU, 0, len(ents))
	for _, e := range ents {
		gpus = append(gpus, driverGPU{bus: strings.ToLower(e.Name())})
	}
	if byUUID || !devNodesOpen(len(gpus)) {
		usable := gpus[:0]
		for _, g := range gpus {
			if readDriverGPU(&g) && !g.excluded && (g.minor == "" || canOpen(filepath.Join(devDir, "nvidia"+g.minor))) {
				usable = append(usable, g)
			}
		}
		gpus = usable
	}
	if len(gpus) == 0 {
		return nil
	}
	slices.SortFunc(gpus, func(a, b driverGPU) int { return strings.Compare(a.bus, b.bus) })
	if order != "PCI_BUS_ID" {
		model := pciDeviceID(gpus[0].bus)
		for _, g := range gpus[1:] {
			if pciDeviceID(g.bus) != model {
				return nil
			}
		}
	}
	if !visibleSet {
		out := make([]string, len(gpus))
		for i, g := range gpus {
			out[i] = g.bus
		}
		return out
	}
	var out []string
	for _, tok := range toks {
		i := -1
		if byUUID {
			if !strings.HasPrefix(tok, "GPU-") {
				break
			}
			for j, g := range gpus {
				if strings.HasPrefix(g.uuid, tok) {
					if i >= 0 {
						i = -1 // not unique
						break
					}
					i = j
				}
			}
		} else if n, err := strconv.Atoi(tok); err == nil && n >= 0 && n < len(gpus) {
			i = n
		}
		if i < 0 {
			break
		}
		if slices.Contains(out, gpus[i].bus) {
			return nil
		}
		out = append(out, gpus[i].bus)
	}
	return out
}

// devNodesOpen reports whether this process may open /dev/nvidia0 to
// /dev/nvidia<n-1>, the device nodes of n GPUs.
func devNodesOpen(n int) bool {
	for i := range n {
		if !canOpen(filepath.Join(devDir, "nvidia"+strconv.Itoa(i))) {
			return false
		}
	}
	return true
}

// pciDeviceID is the PCI device id of the device at bus ("0x2335" for an
// H200), from sysfs; "" when unknown.
func pciDeviceID(bus string) string {
	b, _ := os.ReadFile(filepath.Join(sysPCIDir, bus, "device"))
	return strings.TrimSpace(string(b))
}

// readDriverGPU fills g from the driver's information file of its GPU.
func readDriverGPU(g *driverGPU) bool {
	b, err := os.ReadFile(filepath.Join(procNVIDIAGPU, g.bus, "information"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "GPU UUID":
			g.uuid = v
		case "Device Minor":
			g.minor = v
		case "GPU Excluded":
			g.excluded = v == "Yes"
		}
	}
	return true
}

// canOpen reports whether this process may open the device node path for
// reading and writing, as CUDA does.
func canOpen(path string) bool {
	return unix.Access(path, unix.R_OK|unix.W_OK) == nil
}
