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

// driverGPU is one GPU as /proc/driver/nvidia/gpus/<bus id>/information
// describes it.
type driverGPU struct {
	bus, uuid, model, minor string
	excluded                bool
}

// visibleGPUs lists the PCI bus ids of the GPUs CUDA will show this
// process, in CUDA's order, from the driver's /proc files: the GPUs the
// driver lists whose device node this process can open, in PCI bus order,
// selected and reordered by CUDA_VISIBLE_DEVICES when it is set (indices or
// GPU UUIDs, as CUDA reads it: the list ends at the first entry that names
// no GPU, and an empty one hides every GPU).
// CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) is PCI bus order
// when the GPUs are all of one model; on a host with several models it is
// CUDA's to tell, and the list is empty (unknown) unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID. MIG instances are not resolved to their
// GPU: a list that names one ends there.
func visibleGPUs(visible string, visibleSet bool, order string) []string {
	ents, err := os.ReadDir(procNVIDIAGPU)
	if err != nil || len(ents) == 0 {
		return nil
	}
	var gpus []driverGPU
	for _, e := range ents {
		g, ok := readDriverGPU(e.Name())
		if ok && !g.excluded && (g.minor == "" || canOpen(filepath.Join(devDir, "nvidia"+g.minor))) {
			gpus = append(gpus, g)
		}
	}
	slices.SortFunc(gpus, func(a, b driverGPU) int { return strings.Compare(a.bus, b.bus) })
	if order != "PCI_BUS_ID" && slices.ContainsFunc(gpus, func(g driverGPU) bool { return g.model != gpus[0].model }) {
		return nil
	}
	all := make([]string, len(gpus))
	for i, g := range gpus {
		all[i] = g.bus
	}
	if !visibleSet {
		return all
	}
	var out []string
	for _, tok := range strings.Split(visible, ",") {
		tok = strings.TrimSpace(tok)
		i := -1
		if n, err := strconv.Atoi(tok); err == nil {
			if n >= 0 && n < len(gpus) {
				i = n
			}
		} else if strings.HasPrefix(tok, "GPU-") {
			// A unique prefix of a UUID names the GPU, as in CUDA.
			for j, g := range gpus {
				if strings.HasPrefix(g.uuid, tok) {
					if i >= 0 {
						i = -1
						break
					}
					i = j
				}
			}
		}
		if i < 0 {
			break
		}
		if !slices.Contains(out, all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

// readDriverGPU reads the driver's information file of the GPU at bus.
func readDriverGPU(bus string) (driverGPU, bool) {
	b, err := os.ReadFile(filepath.Join(procNVIDIAGPU, bus, "information"))
	if err != nil {
		return driverGPU{}, false
	}
	g := driverGPU{bus: strings.ToLower(bus)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Model":
			g.model = v
		case "GPU UUID":
			g.uuid = v
		case "Device Minor":
			g.minor = v
		case "GPU Excluded":
			g.excluded = v == "Yes"
		}
	}
	return g, true
}

// canOpen reports whether this process may open the device node path for
// reading and writing, as CUDA does.
func canOpen(path string) bool {
	return unix.Access(path, unix.R_OK|unix.W_OK) == nil
}
