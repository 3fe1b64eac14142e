package gpu

import "fmt"

// PCIePath is how two PCI devices reach each other, in the terms of
// `nvidia-smi topo -m`, from nearest to farthest.
type PCIePath uint8

// PCIe path classes.
const (
	PathUnknown PCIePath = iota // not determined
	PathSelf                    // X: the same device
	PathPIX                     // at most a single PCIe bridge (one switch)
	PathPXB                     // several PCIe bridges, not the host bridge
	PathPHB                     // a PCIe host bridge (typically the CPU's root complex)
	PathNode                    // PCIe plus the interconnect between host bridges of one NUMA node
	PathSys                     // PCIe plus the SMP interconnect between NUMA nodes
)

var pathNames = [...]string{PathUnknown: "?", PathSelf: "X", PathPIX: "PIX", PathPXB: "PXB", PathPHB: "PHB", PathNode: "NODE", PathSys: "SYS"}

// String returns nvidia-smi's label for the path ("PIX", "SYS", ...).
func (p PCIePath) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return fmt.Sprintf("PCIePath(%d)", uint8(p))
}

// Route is how the runtime moves data between two GPUs of one host.
type Route uint8

// Routes, from slowest to fastest.
const (
	// RouteHostStaging copies through pinned host memory: no peer access.
	RouteHostStaging Route = iota
	// RoutePCIePeer copies GPU to GPU over PCIe with peer access.
	RoutePCIePeer
	// RouteNVLinkPeer copies GPU to GPU over NVLink with peer access.
	RouteNVLinkPeer
)

// String names the route as `gorun --topo` prints it.
func (r Route) String() string {
	switch r {
	case RouteNVLinkPeer:
		return "NVLink peer copy"
	case RoutePCIePeer:
		return "PCIe peer copy"
	default:
		return "staging through host memory"
	}
}

// GPU is one GPU of the host.
type GPU struct {
	// Index is the GPU's NVML index, the number nvidia-smi shows.
	Index int
	// CUDA is the GPU's CUDA device ordinal in this process, or -1 when CUDA
	// does not see it (CUDA_VISIBLE_DEVICES, no driver). CUDA may number GPUs
	// differently from NVML; the runtime addresses GPUs by this number.
	CUDA int
	// Name is the product name, e.g. "NVIDIA H200".
	Name string
	// UUID is the GPU's UUID, "GPU-…", stable across processes and reboots.
	UUID string
	// MemoryBytes is the GPU's memory.
	MemoryBytes uint64
	// PCIBusID is the GPU's PCI address in sysfs form ("0000:18:00.0").
	PCIBusID string
	// NUMANode is the host NUMA node nearest the GPU, -1 if unknown.
	NUMANode int
	// CPUAffinity lists the CPUs nearest the GPU, ascending.
	CPUAffinity []int
	// NICPaths gives the PCIe path from the GPU to each of Topology.NICs.
	NICPaths []PCIePath
	// NearestNIC is the index in Topology.NICs of the NIC nearest the GPU
	// (the first of the nearest), -1 when there is none.
	NearestNIC int
}

// Link is how two GPUs are connected.
type Link struct {
	// NVLinks is the number of NVLinks between the two (through NVSwitches
	// when NVSwitch is set), 0 when they are not NVLink peers.
	NVLinks int
	// NVLinkGBps is one link's bandwidth per direction in GB/s (10^9 B/s).
	NVLinkGBps float64
	// NVSwitch reports that the links go through NVSwitches.
	NVSwitch bool
	// PCIe is the PCIe path between the two.
	PCIe PCIePath
	// PeerAccess reports that each GPU can map the other's memory (CUDA's
	// cuDeviceCanAccessPeer both ways, or NVML's P2P read status without
	// CUDA).
	PeerAccess bool
	// Route is how the runtime moves data between the two.
	Route Route
}

// Label returns the cell `nvidia-smi topo -m` prints for the pair: "NV18"
// for 18 NVLinks, else the PCIe path.
func (l Link) Label() string {
	if l.NVLinks > 0 {
		return fmt.Sprintf("NV%d", l.NVLinks)
	}
	return l.PCIe.String()
}

// NIC is a network device of the host with a PCI address.
type NIC struct {
	// Name is the RDMA device ("mlx5_0") or, for plain Ethernet, the
	// interface ("eth0").
	Name string
	// RDMA reports an RDMA device (from /sys/class/infiniband).
	RDMA bool
	// NetDevs are the network interfaces on the device.
	NetDevs []string
	// PCIBusID is the device's PCI address ("0000:3b:00.0").
	PCIBusID string
	// NUMANode is the NUMA node of the device, -1 if unknown.
	NUMANode int
	// SpeedMbps is the link speed in Mb/s, 0 if unknown.
	SpeedMbps int

	chain pciChain // the device's place in the PCI tree
}

// Topology is what discovery found on this host: GPUs, how each pair is
// linked, and NICs.
type Topology struct {
	// GPUs in NVML order (nvidia-smi's numbering).
	GPUs []GPU
	// Links[i][j] is the connection between GPUs[i] and GPUs[j] (i != j).
	Links [][]Link
	// NICs, RDMA devices first, each group sorted by name.
	NICs []NIC
	// NoGPU says why GPUs is empty ("" when it is not).
	NoGPU string
	// Driver is the NVIDIA driver version ("580.159.04"), "" if unknown.
	Driver string
	// CUDAVersion is the CUDA version the driver supports (12080 = 12.8), 0
	// if CUDA is unavailable.
	CUDAVersion int
	// Warnings are queries that failed without spoiling the rest.
	Warnings []string
}

// Route returns how the runtime moves data from GPU i to GPU j (NVML
// indices): RouteNVLinkPeer, RoutePCIePeer or RouteHostStaging.
func (t *Topology) Route(i, j int) Route {
	if i == j || i < 0 || j < 0 || i >= len(t.GPUs) || j >= len(t.GPUs) {
		return RouteHostStaging
	}
	return t.Links[i][j].Route
}

// ByCUDA returns the GPU with CUDA ordinal dev, or nil.
func (t *Topology) ByCUDA(dev int) *GPU {
	for i := range t.GPUs {
		if t.GPUs[i].CUDA == dev && dev >= 0 {
			return &t.GPUs[i]
		}
	}
	return nil
}

// route derives a link's route from its NVLinks and peer access.
func (l *Link) route() Route {
	switch {
	case l.PeerAccess && l.NVLinks > 0:
		return RouteNVLinkPeer
	case l.PeerAccess:
		return RoutePCIePeer
	default:
		return RouteHostStaging
	}
}
