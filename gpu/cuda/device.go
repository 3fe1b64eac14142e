package cuda

import (
	"fmt"
	"strings"
)

// Device is a CUDA device ordinal in this process: 0..DeviceCount()-1, in the
// order CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES give (which may differ from
// nvidia-smi's order; match devices by PCIBusID or UUID).
type Device int

// Attribute is a CUdevice_attribute.
type Attribute int

// The device attributes this project reads (values from cuda.h).
const (
	AttrMaxThreadsPerBlock          Attribute = 1
	AttrMultiprocessorCount         Attribute = 16
	AttrMemoryClockRate             Attribute = 36 // kHz
	AttrGlobalMemoryBusWidth        Attribute = 37 // bits
	AttrL2CacheSize                 Attribute = 38 // bytes
	AttrMaxThreadsPerMultiprocessor Attribute = 39
	AttrAsyncEngineCount            Attribute = 40
	AttrUnifiedAddressing           Attribute = 41
	AttrComputeCapabilityMajor      Attribute = 75
	AttrComputeCapabilityMinor      Attribute = 76
)

// DeviceCount returns how many CUDA devices this process sees.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	n, r := drvDeviceGetCount()
	return n, check("cuDeviceGetCount", r)
}

// GetDevice returns the device of the given ordinal, checking that it exists.
func GetDevice(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	d, r := drvDeviceGet(ordinal)
	if err := check("cuDeviceGet", r); err != nil {
		return 0, fmt.Errorf("device %d: %w", ordinal, err)
	}
	return Device(d), nil
}

// Name returns the device's product name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	s, r := drvDeviceGetName(int(d))
	return s, check("cuDeviceGetName", r)
}

// Attribute returns one device attribute.
func (d Device) Attribute(a Attribute) (int, error) {
	v, r := drvDeviceGetAttribute(int(a), int(d))
	return v, check("cuDeviceGetAttribute", r)
}

// TotalMem returns the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	v, r := drvDeviceTotalMem(int(d))
	return v, check("cuDeviceTotalMem_v2", r)
}

// PCIBusID returns the device's PCI address in sysfs form, lower case
// ("0000:18:00.0").
func (d Device) PCIBusID() (string, error) {
	s, r := drvDeviceGetPCIBusID(int(d))
	return strings.ToLower(s), check("cuDeviceGetPCIBusId", r)
}

// UUID returns the device's UUID as nvidia-smi prints it
// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx").
func (d Device) UUID() (string, error) {
	u, r := drvDeviceGetUUID(int(d))
	if err := check("cuDeviceGetUuid_v2", r); err != nil {
		return "", err
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// ComputeCapability returns the device's compute capability (9, 0 on Hopper).
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(AttrComputeCapabilityMinor)
	return major, minor, err
}

// CanAccessPeer reports whether d can map peer's memory (cuDeviceCanAccessPeer):
// then kernels on d may read peer's memory and copies go GPU to GPU directly.
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	v, r := drvDeviceCanAccessPeer(int(d), int(peer))
	return v, check("cuDeviceCanAccessPeer", r)
}
