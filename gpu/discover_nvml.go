//go:build cgo

package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlMaxCPUs bounds the CPU numbers NVML's affinity masks are read for.
const nvmlMaxCPUs = 4096

// nvmlDiscover fills t.GPUs, t.Links and t.Driver from NVML. It returns an
// error only when NVML itself cannot be used (library missing, driver not
// loaded); per-GPU failures become warnings.
func nvmlDiscover(t *Topology) error {
	if r := nvml.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND {
			// go-nvml drops dlopen's reason: ask again to report it.
			if err := dl.New("libnvidia-ml.so.1", dl.RTLD_LAZY|dl.RTLD_LOCAL).Open(); err != nil {
				return fmt.Errorf("nvmlInit: %w", err)
			}
		}
		return fmt.Errorf("nvmlInit: %s", nvmlErr(r))
	}
	defer nvml.Shutdown()
	if v, r := nvml.SystemGetDriverVersion(); r == nvml.SUCCESS {
		t.Driver = v
	}
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return fmt.Errorf("nvmlDeviceGetCount: %s", nvmlErr(r))
	}
	warn := func(format string, a ...any) { t.Warnings = append(t.Warnings, fmt.Sprintf(format, a...)) }
	var devs []nvml.Device
	for i := 0; i < n; i++ {
		d, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			warn("NVML GPU %d: nvmlDeviceGetHandleByIndex: %s", i, nvmlErr(r))
			continue
		}
		g := GPU{Index: i, CUDA: -1, NUMANode: -1}
		if g.Name, r = d.GetName(); r != nvml.SUCCESS {
			warn("NVML GPU %d: nvmlDeviceGetName: %s", i, nvmlErr(r))
		}
		if g.UUID, r = d.GetUUID(); r != nvml.SUCCESS {
			warn("NVML GPU %d: nvmlDeviceGetUUID: %s", i, nvmlErr(r))
		}
		if m, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
			g.MemoryBytes = m.Total
		} else {
			warn("NVML GPU %d: nvmlDeviceGetMemoryInfo: %s", i, nvmlErr(r))
		}
		if p, r := d.GetPciInfo(); r == nvml.SUCCESS {
			g.PCIBusID = canonicalBusID(cString(p.BusId[:]))
		} else {
			warn("NVML GPU %d: nvmlDeviceGetPciInfo: %s", i, nvmlErr(r))
		}
		if mask, r := d.GetCpuAffinity(nvmlMaxCPUs); r == nvml.SUCCESS {
			g.CPUAffinity = cpusOfMask(mask)
		} else if g.PCIBusID != "" {
			g.CPUAffinity = pciLocalCPUs(g.PCIBusID)
		}
		if g.PCIBusID != "" {
			g.NUMANode = pciNUMANode(g.PCIBusID)
		}
		if g.NUMANode < 0 {
			// nvidia-smi's "NUMA Affinity": the node set nearest the GPU.
			if mask, r := d.GetMemoryAffinity(64, nvml.AFFINITY_SCOPE_NODE); r == nvml.SUCCESS {
				if nodes := cpusOfMask(mask); len(nodes) == 1 {
					g.NUMANode = nodes[0]
				}
			}
		}
		devs = append(devs, d)
		t.GPUs = append(t.GPUs, g)
	}
	t.Links = newLinks(len(t.GPUs))
	links := make([]nvlinkInfo, len(devs))
	for i, d := range devs {
		links[i] = nvlinksOf(d)
	}
	for i := range devs {
		for j := range devs {
			if i == j {
				continue
			}
			l := &t.Links[i][j]
			if lvl, r := devs[i].GetTopologyCommonAncestor(devs[j]); r == nvml.SUCCESS {
				l.PCIe = pathOfLevel(lvl)
			} else {
				warn("NVML GPUs %d-%d: nvmlDeviceGetTopologyCommonAncestor: %s", i, j, nvmlErr(r))
			}
			if s, r := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_READ); r == nvml.SUCCESS {
				l.PeerAccess = s == nvml.P2P_STATUS_OK
			}
			direct := links[i].byRemote[t.GPUs[j].PCIBusID]
			si, sj := links[i].switched(t.GPUs), links[j].switched(t.GPUs)
			switch {
			case direct > 0:
				l.NVLinks = direct
			case si > 0 && sj > 0:
				if s, r := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_NVLINK); r == nvml.SUCCESS && s == nvml.P2P_STATUS_OK {
					l.NVLinks = min(si, sj)
					l.NVSwitch = true
				}
			}
			if l.NVLinks > 0 {
				l.NVLinkGBps = links[i].gbps
			}
		}
	}
	return nil
}

// nvlinkInfo is what one GPU's NVLinks reach.
type nvlinkInfo struct {
	byRemote map[string]int // active links by the PCI address at their far end
	active   int            // active links
	gbps     float64        // one link's bandwidth per direction
}

// switched counts the links that end at no GPU: at NVSwitches (whose PCI
// addresses, when NVML reports any, are not GPUs').
func (n nvlinkInfo) switched(gpus []GPU) int {
	k := n.active
	for _, g := range gpus {
		k -= n.byRemote[g.PCIBusID]
	}
	return k
}

// nvlinksOf walks a GPU's NVLinks.
func nvlinksOf(d nvml.Device) nvlinkInfo {
	info := nvlinkInfo{byRemote: map[string]int{}}
	version := uint32(0)
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, r := d.GetNvLinkState(link)
		if r != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		info.active++
		if v, r := d.GetNvLinkVersion(link); r == nvml.SUCCESS {
			version = v
		}
		if typ, r := d.GetNvLinkRemoteDeviceType(link); r == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH {
			continue
		}
		if p, r := d.GetNvLinkRemotePciInfo(link); r == nvml.SUCCESS {
			info.byRemote[canonicalBusID(cString(p.BusId[:]))]++
		}
	}
	info.gbps = nvlinkSpeed(d, version)
	return info
}

// nvlinkSpeed returns one link's bandwidth per direction in GB/s: NVML's
// common link speed field when the driver has it, else the NVLink
// generation's nominal rate.
func nvlinkSpeed(d nvml.Device, version uint32) float64 {
	vals := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_SPEED_MBPS_COMMON}}
	if r := d.GetFieldValues(vals); r == nvml.SUCCESS && nvml.Return(vals[0].NvmlReturn) == nvml.SUCCESS {
		if v := fieldValue(vals[0]); v > 0 {
			return v / 1000 // MB/s to GB/s
		}
	}
	// nvmlDeviceGetNvLinkVersion reports NVML_NVLINK_VERSION_*: 1.0, 2.0,
	// 2.2, 3.0, 3.1, 4.0, 5.0 as 1..7.
	switch {
	case version == 1:
		return 20
	case version >= 2 && version <= 6:
		return 25
	case version >= 7:
		return 50
	}
	return 0
}

// fieldValue decodes an NVML field value as a float.
func fieldValue(f nvml.FieldValue) float64 {
	b := f.Value[:]
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b))
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b))
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b))
	}
	return 0
}

// pathOfLevel maps NVML's common-ancestor level to nvidia-smi's label.
func pathOfLevel(l nvml.GpuTopologyLevel) PCIePath {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return PathSelf
	case nvml.TOPOLOGY_SINGLE:
		return PathPIX
	case nvml.TOPOLOGY_MULTIPLE:
		return PathPXB
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return PathPHB
	case nvml.TOPOLOGY_NODE:
		return PathNode
	case nvml.TOPOLOGY_SYSTEM:
		return PathSys
	}
	return PathUnknown
}

// cString reads a NUL-terminated byte array.
func cString(b []uint8) string {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

// nvmlErr names an NVML return code.
func nvmlErr(r nvml.Return) error {
	return errors.New(nvml.ErrorString(r))
}
