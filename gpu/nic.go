package gpu

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// discoverNICs lists the host's network devices that sit on PCI: RDMA
// devices from /sys/class/infiniband (InfiniBand, RoCE, EFA), then plain
// network interfaces from /sys/class/net whose PCI device no RDMA device
// already covers. Virtual interfaces (lo, bridges, veth) have no PCI device
// and are left out.
func discoverNICs() []NIC {
	var nics []NIC
	seen := map[string]bool{}
	ibDir := filepath.Join(sysfs, "class", "infiniband")
	if ents, err := os.ReadDir(ibDir); err == nil {
		for _, e := range ents {
			dev := filepath.Join(ibDir, e.Name(), "device")
			chain, ok := chainOf(dev)
			if !ok {
				continue
			}
			n := NIC{Name: e.Name(), RDMA: true, PCIBusID: chain.device(), chain: chain}
			n.NUMANode = pciNUMANode(n.PCIBusID)
			if nets, err := os.ReadDir(filepath.Join(dev, "net")); err == nil {
				for _, ne := range nets {
					n.NetDevs = append(n.NetDevs, ne.Name())
				}
			}
			n.SpeedMbps = ibRateMbps(filepath.Join(ibDir, e.Name(), "ports", "1", "rate"))
			seen[n.PCIBusID] = true
			nics = append(nics, n)
		}
	}
	sort.Slice(nics, func(i, j int) bool { return nics[i].Name < nics[j].Name })
	var eth []NIC
	netDir := filepath.Join(sysfs, "class", "net")
	if ents, err := os.ReadDir(netDir); err == nil {
		for _, e := range ents {
			chain, ok := chainOf(filepath.Join(netDir, e.Name(), "device"))
			if !ok || seen[chain.device()] {
				continue
			}
			n := NIC{Name: e.Name(), NetDevs: []string{e.Name()}, PCIBusID: chain.device(), chain: chain}
			n.NUMANode = pciNUMANode(n.PCIBusID)
			if s := readInt(filepath.Join(netDir, e.Name(), "speed"), 0); s > 0 {
				n.SpeedMbps = s
			}
			eth = append(eth, n)
		}
	}
	sort.Slice(eth, func(i, j int) bool { return eth[i].Name < eth[j].Name })
	return append(nics, eth...)
}

// ibRateMbps parses an RDMA port's rate file ("400 Gb/sec (4X NDR)").
func ibRateMbps(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	switch {
	case strings.HasPrefix(f[1], "Gb"):
		return int(v * 1000)
	case strings.HasPrefix(f[1], "Mb"):
		return int(v)
	}
	return 0
}

// placeNICs fills each GPU's NICPaths and NearestNIC.
func placeNICs(t *Topology) {
	for i := range t.GPUs {
		g := &t.GPUs[i]
		g.NearestNIC = -1
		g.NICPaths = make([]PCIePath, len(t.NICs))
		gc, ok := chainOfBusID(g.PCIBusID)
		for j, n := range t.NICs {
			if !ok {
				g.NICPaths[j] = PathUnknown
				continue
			}
			g.NICPaths[j] = pathBetween(gc, n.chain, g.NUMANode, n.NUMANode)
			if p := g.NICPaths[j]; p != PathUnknown && (g.NearestNIC < 0 || p < g.NICPaths[g.NearestNIC]) {
				g.NearestNIC = j
			}
		}
	}
}
