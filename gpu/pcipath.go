package gpu

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// sysfs is the root of the sysfs tree that discovery reads; tests point it
// at a fake tree.
var sysfs = "/sys"

// pciChain is a device's place in the PCI tree: its root complex
// ("pci0000:00") and the PCI addresses from the root port down to the device
// itself.
type pciChain struct {
	root string
	bdfs []string
}

var bdfRE = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// canonicalBusID turns NVML's "00000000:18:00.0" or CUDA's "0000:18:00.0"
// into sysfs's lower-case "0000:18:00.0".
func canonicalBusID(s string) string {
	s = strings.ToLower(strings.TrimRight(strings.TrimSpace(s), "\x00"))
	if i := strings.IndexByte(s, ':'); i > 4 && strings.Count(s, ":") == 2 {
		s = s[i-4:]
	}
	return s
}

// chainOf resolves the sysfs device directory dir (a path that may hold
// symbolic links) into its PCI chain. Non-PCI components below the last PCI
// device (virtio2, net/eth0) are dropped; ok is false when dir is not under a
// PCI root.
func chainOf(dir string) (pciChain, bool) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return pciChain{}, false
	}
	devices := filepath.Join(sysfs, "devices") + string(filepath.Separator)
	rest, found := strings.CutPrefix(real, devices)
	if !found {
		return pciChain{}, false
	}
	parts := strings.Split(rest, string(filepath.Separator))
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "pci") {
		return pciChain{}, false
	}
	c := pciChain{root: parts[0]}
	for _, p := range parts[1:] {
		if !bdfRE.MatchString(p) {
			break
		}
		c.bdfs = append(c.bdfs, p)
	}
	if len(c.bdfs) == 0 {
		return pciChain{}, false
	}
	return c, true
}

// chainOfBusID returns the PCI chain of the device with sysfs address bdf.
func chainOfBusID(bdf string) (pciChain, bool) {
	return chainOf(filepath.Join(sysfs, "bus", "pci", "devices", bdf))
}

// device returns the chain's device: its last PCI address.
func (c pciChain) device() string {
	if len(c.bdfs) == 0 {
		return ""
	}
	return c.bdfs[len(c.bdfs)-1]
}

// pathBetween classifies the PCIe path between two devices the way
// nvidia-smi does: through at most one switch (PIX), several bridges below
// the host bridge (PXB), the host bridge (PHB), several host bridges of one
// NUMA node (NODE) or across NUMA nodes (SYS). NUMA node -1 (unknown, as on
// single-node hosts) counts as the same node.
func pathBetween(a, b pciChain, numaA, numaB int) PCIePath {
	if len(a.bdfs) == 0 || len(b.bdfs) == 0 {
		return PathUnknown
	}
	if a.root == b.root && a.device() == b.device() {
		return PathSelf
	}
	if a.root != b.root {
		if numaA >= 0 && numaB >= 0 && numaA != numaB {
			return PathSys
		}
		return PathNode
	}
	k := 0
	for k < len(a.bdfs) && k < len(b.bdfs) && a.bdfs[k] == b.bdfs[k] {
		k++
	}
	if k == 0 {
		return PathPHB
	}
	// Below the deepest shared bridge, each side passes the bridges strictly
	// between it and the device: one each (a switch's downstream ports) or
	// none (functions of one device) is a single switch.
	if len(a.bdfs)-k-1 <= 1 && len(b.bdfs)-k-1 <= 1 {
		return PathPIX
	}
	return PathPXB
}

// readInt reads a sysfs file holding one integer; def when it cannot.
func readInt(path string, def int) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return def
	}
	return v
}

// pciNUMANode returns the NUMA node of PCI device bdf, -1 if unknown.
func pciNUMANode(bdf string) int {
	return readInt(filepath.Join(sysfs, "bus", "pci", "devices", bdf, "numa_node"), -1)
}

// pciLocalCPUs returns the CPUs local to PCI device bdf, nil if unknown.
func pciLocalCPUs(bdf string) []int {
	b, err := os.ReadFile(filepath.Join(sysfs, "bus", "pci", "devices", bdf, "local_cpulist"))
	if err != nil {
		return nil
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return cpus
}
