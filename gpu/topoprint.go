package gpu

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// TopoOptions configure WriteTopology.
type TopoOptions struct {
	// Topology to print; nil runs Discover.
	Topology *Topology
	// Probe also measures each GPU pair's copy bandwidth (gorun --topo
	// --probe): a few seconds on a host of 8 GPUs.
	Probe bool
	// ProbeBytes is the size of each probe copy; 0 means GORUN_GPU_PROBE_BYTES
	// or 256 MiB.
	ProbeBytes int
	// ProbeIters is how many copies are timed per pair; 0 means 10.
	ProbeIters int
}

// WriteTopology prints the host's GPU/NIC/NUMA matrix in the layout of
// `nvidia-smi topo -m`, the legends, each GPU's details and nearest NIC, and
// for every GPU pair the route the runtime will take (NVLink peer copy, PCIe
// peer copy or staging through host memory); with Probe, the measured copy
// bandwidths too. It is what `gorun --topo [--probe]` prints.
//
// On a host without GPUs it prints "no GPU: <reason>" and the NICs and
// returns nil: that is an answer, not a failure. It returns an error only
// when writing to w fails or the probe fails.
func WriteTopology(w io.Writer, opts TopoOptions) error {
	t := opts.Topology
	if t == nil {
		t = Discover()
	}
	ew := &errWriter{w: w}
	if len(t.GPUs) == 0 {
		fmt.Fprintf(ew, "no GPU: %s\n", t.NoGPU)
		writeNICs(ew, t)
		writeWarnings(ew, t)
		return ew.err
	}
	writeMatrix(ew, t)
	fmt.Fprint(ew, `
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`)
	writeNICs(ew, t)
	fmt.Fprintf(ew, "\nGPUs (driver %s, CUDA %s):\n", orNA(t.Driver), cudaVersionString(t.CUDAVersion))
	for _, g := range t.GPUs {
		cudaDev := "not visible to CUDA"
		if g.CUDA >= 0 {
			cudaDev = fmt.Sprintf("CUDA device %d", g.CUDA)
		}
		nic := "none"
		if g.NearestNIC >= 0 {
			nic = fmt.Sprintf("NIC%d %s (%v)", g.NearestNIC, t.NICs[g.NearestNIC].Name, g.NICPaths[g.NearestNIC])
		}
		fmt.Fprintf(ew, "  GPU%d: %s, %s, %d MiB, PCI %s, NUMA %s, %s, nearest NIC: %s\n",
			g.Index, g.Name, g.UUID, g.MemoryBytes>>20, g.PCIBusID, numaString(g.NUMANode), cudaDev, nic)
	}
	var probe *Probe
	if opts.Probe {
		bytes := opts.ProbeBytes
		if bytes == 0 {
			bytes, _ = strconv.Atoi(getenv(envProbeBytes, "0"))
		}
		var err error
		if probe, err = ProbeBandwidth(t, bytes, opts.ProbeIters); err != nil {
			writeWarnings(ew, t)
			if ew.err != nil {
				return ew.err
			}
			return fmt.Errorf("gpu: topology probe: %w", err)
		}
	}
	fmt.Fprintf(ew, "\nRoutes the runtime will use between GPUs:\n")
	for i := range t.GPUs {
		for j := i + 1; j < len(t.GPUs); j++ {
			l := t.Links[i][j]
			detail := ""
			switch {
			case l.NVLinks > 0:
				via := ""
				if l.NVSwitch {
					via = " via NVSwitch"
				}
				detail = fmt.Sprintf("%d NVLinks%s x %.1f GB/s = %.0f GB/s per direction", l.NVLinks, via, l.NVLinkGBps, float64(l.NVLinks)*l.NVLinkGBps)
				if !l.PeerAccess {
					detail += "; CUDA peer access unavailable"
				}
			default:
				detail = "PCIe " + l.PCIe.String()
				if !l.PeerAccess {
					detail += ", no peer access"
				}
			}
			fmt.Fprintf(ew, "  GPU%d <-> GPU%d: %v (%s)", i, j, l.Route, detail)
			if probe != nil {
				fmt.Fprintf(ew, "; measured %.0f / %.0f GB/s one way, %.0f GB/s both ways",
					probe.OneWay[i][j], probe.OneWay[j][i], probe.BothWays[i][j])
			}
			fmt.Fprintln(ew)
		}
	}
	if probe != nil {
		fmt.Fprintf(ew, "\nMeasured copy bandwidth, GB/s (%d MiB copies x %d; row = source, column = destination):\n", probe.Bytes>>20, probe.Iters)
		writeBandwidth(ew, t, probe.OneWay)
		fmt.Fprintf(ew, "\nBoth ways at once, GB/s (sum of the two directions):\n")
		writeBandwidth(ew, t, probe.BothWays)
	}
	writeWarnings(ew, t)
	return ew.err
}

// writeMatrix prints the nvidia-smi-style matrix.
func writeMatrix(w io.Writer, t *Topology) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	hdr := []string{""}
	for i := range t.GPUs {
		hdr = append(hdr, fmt.Sprintf("GPU%d", i))
	}
	for i := range t.NICs {
		hdr = append(hdr, fmt.Sprintf("NIC%d", i))
	}
	hdr = append(hdr, "CPU Affinity", "NUMA Affinity", "CUDA")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for i, g := range t.GPUs {
		row := []string{fmt.Sprintf("GPU%d", i)}
		for j := range t.GPUs {
			if i == j {
				row = append(row, "X")
			} else {
				row = append(row, t.Links[i][j].Label())
			}
		}
		for j := range t.NICs {
			row = append(row, g.NICPaths[j].String())
		}
		cudaDev := "-"
		if g.CUDA >= 0 {
			cudaDev = strconv.Itoa(g.CUDA)
		}
		row = append(row, formatCPUList(g.CPUAffinity), numaString(g.NUMANode), cudaDev)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	for k, n := range t.NICs {
		row := []string{fmt.Sprintf("NIC%d", k)}
		for _, g := range t.GPUs {
			row = append(row, g.NICPaths[k].String())
		}
		for j, m := range t.NICs {
			if j == k {
				row = append(row, "X")
			} else {
				row = append(row, pathBetween(n.chain, m.chain, n.NUMANode, m.NUMANode).String())
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
}

// writeNICs prints the NIC legend.
func writeNICs(w io.Writer, t *Topology) {
	if len(t.NICs) == 0 {
		fmt.Fprintln(w, "\nNICs: none with a PCI address")
		return
	}
	fmt.Fprintln(w, "\nNIC Legend:")
	for k, n := range t.NICs {
		kind := "Ethernet"
		if n.RDMA {
			kind = "RDMA"
		}
		speed := "speed unknown"
		if n.SpeedMbps > 0 {
			speed = fmt.Sprintf("%d Gb/s", n.SpeedMbps/1000)
			if n.SpeedMbps < 1000 {
				speed = fmt.Sprintf("%d Mb/s", n.SpeedMbps)
			}
		}
		fmt.Fprintf(w, "  NIC%d: %s (%s, %s, PCI %s, NUMA %s, %s)\n", k, n.Name, kind,
			strings.Join(n.NetDevs, ","), n.PCIBusID, numaString(n.NUMANode), speed)
	}
}

// writeBandwidth prints a GPU × GPU matrix of rates.
func writeBandwidth(w io.Writer, t *Topology, m [][]float64) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	hdr := []string{""}
	for i := range t.GPUs {
		hdr = append(hdr, fmt.Sprintf("GPU%d", i))
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for i := range t.GPUs {
		row := []string{fmt.Sprintf("GPU%d", i)}
		for j := range t.GPUs {
			switch {
			case i == j:
				row = append(row, "X")
			case m[i][j] == 0:
				row = append(row, "-")
			default:
				row = append(row, fmt.Sprintf("%.0f", m[i][j]))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
}

// writeWarnings prints what discovery could not find out.
func writeWarnings(w io.Writer, t *Topology) {
	if len(t.Warnings) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWarnings:")
	for _, s := range t.Warnings {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

// numaString prints a NUMA node the way nvidia-smi does.
func numaString(n int) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.Itoa(n)
}

// cudaVersionString prints 12080 as "12.8".
func cudaVersionString(v int) string {
	if v <= 0 {
		return "N/A"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// orNA returns s, or "N/A" when it is empty.
func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// errWriter keeps the first write error so that printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

// Write writes to the underlying writer until the first error.
func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
