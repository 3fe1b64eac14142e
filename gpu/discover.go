package gpu

import (
	"fmt"

	"github.com/gorun/gorun/gpu/cuda"
)

// Discover finds the host's GPUs (through NVML, libnvidia-ml.so.1, loaded at
// run time), how every pair is linked, which pairs CUDA can connect peer to
// peer, and the NICs with their place in the PCI tree. It never fails: on a
// host without GPU, driver or cgo, the Topology has no GPUs and NoGPU says
// why; queries that fail on a working GPU become Warnings. Without NVML but
// with CUDA, GPUs come from CUDA and sysfs, without NVLink details.
//
// It takes tens to hundreds of milliseconds (NVML and CUDA initialization);
// call it once, at start-up.
func Discover() *Topology {
	t := &Topology{NICs: discoverNICs()}
	nvmlErr := nvmlDiscover(t)
	cudaOK, cudaWhy := cuda.Available()
	if cudaOK {
		if v, err := cuda.DriverVersion(); err == nil {
			t.CUDAVersion = v
		}
	}
	switch {
	case nvmlErr != nil && !cudaOK:
		t.GPUs, t.Links = nil, nil
		t.NoGPU = fmt.Sprintf("NVML: %v; CUDA: %s", nvmlErr, cudaWhy)
	case nvmlErr != nil:
		t.Warnings = append(t.Warnings, fmt.Sprintf("NVML unavailable (%v): GPUs from CUDA and sysfs, NVLinks unknown", nvmlErr))
		cudaDiscover(t)
	case len(t.GPUs) == 0:
		t.NoGPU = "NVML sees no GPU"
	}
	if len(t.GPUs) > 0 {
		if cudaOK {
			attachCUDA(t)
		} else {
			t.Warnings = append(t.Warnings, "CUDA unavailable: "+cudaWhy)
		}
	}
	for i := range t.Links {
		for j := range t.Links[i] {
			if i != j {
				t.Links[i][j].Route = t.Links[i][j].route()
			}
		}
	}
	placeNICs(t)
	return t
}

// Err returns nil when the host has GPUs, else an error wrapping ErrNoGPU
// with the reason.
func (t *Topology) Err() error {
	if len(t.GPUs) > 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNoGPU, t.NoGPU)
}

// newLinks makes an n×n link matrix.
func newLinks(n int) [][]Link {
	l := make([][]Link, n)
	for i := range l {
		l[i] = make([]Link, n)
		l[i][i].PCIe = PathSelf
	}
	return l
}

// attachCUDA numbers the GPUs by CUDA ordinal (matched by PCI address) and
// asks CUDA which pairs can use peer access.
func attachCUDA(t *Topology) {
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Warnings = append(t.Warnings, "CUDA: "+err.Error())
		return
	}
	for i := range t.GPUs {
		t.GPUs[i].CUDA = -1
	}
	for d := 0; d < n; d++ {
		bus, err := cuda.Device(d).PCIBusID()
		if err != nil {
			t.Warnings = append(t.Warnings, fmt.Sprintf("CUDA device %d: %v", d, err))
			continue
		}
		for i := range t.GPUs {
			if t.GPUs[i].PCIBusID == canonicalBusID(bus) {
				t.GPUs[i].CUDA = d
			}
		}
	}
	for i := range t.GPUs {
		for j := range t.GPUs {
			a, b := t.GPUs[i].CUDA, t.GPUs[j].CUDA
			if i == j || a < 0 || b < 0 {
				continue
			}
			ab, err1 := cuda.Device(a).CanAccessPeer(cuda.Device(b))
			ba, err2 := cuda.Device(b).CanAccessPeer(cuda.Device(a))
			if err1 != nil || err2 != nil {
				t.Warnings = append(t.Warnings, fmt.Sprintf("CUDA peer access %d-%d: %v %v", a, b, err1, err2))
				continue
			}
			t.Links[i][j].PeerAccess = ab && ba
		}
	}
}

// cudaDiscover builds the GPU list from CUDA and sysfs alone, for hosts
// where NVML is missing.
func cudaDiscover(t *Topology) {
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Warnings = append(t.Warnings, "CUDA: "+err.Error())
		return
	}
	t.GPUs = nil
	for d := 0; d < n; d++ {
		dev := cuda.Device(d)
		g := GPU{Index: d, CUDA: d, NUMANode: -1}
		var errs []error
		var err error
		g.Name, err = dev.Name()
		errs = append(errs, err)
		g.UUID, err = dev.UUID()
		errs = append(errs, err)
		g.MemoryBytes, err = dev.TotalMem()
		errs = append(errs, err)
		var bus string
		bus, err = dev.PCIBusID()
		errs = append(errs, err)
		for _, e := range errs {
			if e != nil {
				t.Warnings = append(t.Warnings, fmt.Sprintf("CUDA device %d: %v", d, e))
			}
		}
		g.PCIBusID = canonicalBusID(bus)
		g.NUMANode = pciNUMANode(g.PCIBusID)
		g.CPUAffinity = pciLocalCPUs(g.PCIBusID)
		t.GPUs = append(t.GPUs, g)
	}
	t.Links = newLinks(len(t.GPUs))
	for i := range t.GPUs {
		ci, oki := chainOfBusID(t.GPUs[i].PCIBusID)
		for j := range t.GPUs {
			if i == j {
				continue
			}
			cj, okj := chainOfBusID(t.GPUs[j].PCIBusID)
			if oki && okj {
				t.Links[i][j].PCIe = pathBetween(ci, cj, t.GPUs[i].NUMANode, t.GPUs[j].NUMANode)
			}
		}
	}
}
