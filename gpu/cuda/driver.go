package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

var (
	initOnce sync.Once
	initErr  error
	loaded   atomic.Bool
)

// driverLoaded reports whether libcuda.so.1 was opened and its entry points
// resolved (cuInit itself may still have failed).
func driverLoaded() bool { return loaded.Load() }

// Init loads libcuda.so.1 and calls cuInit, once per process; later calls
// return the first call's result. Every other function of this package calls
// it, so calling it first is needed only to learn why CUDA is unusable: the
// error then wraps ErrNoDriver (and, when the driver sees no GPU,
// ErrNoDevice) and names the reason.
func Init() error {
	initOnce.Do(func() {
		if err := drvLoad(); err != nil {
			initErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		loaded.Store(true)
		if r := drvInit(); r != Success {
			err := check("cuInit", r)
			if r == ErrorNoDevice {
				initErr = fmt.Errorf("%w: %w", ErrNoDevice, err)
			} else {
				initErr = fmt.Errorf("%w: %w", ErrNoDriver, err)
			}
		}
	})
	return initErr
}

// Available reports whether CUDA can be used in this process, and if not, why.
func Available() (bool, string) {
	if err := Init(); err != nil {
		return false, err.Error()
	}
	n, err := DeviceCount()
	if err != nil {
		return false, err.Error()
	}
	if n == 0 {
		return false, ErrNoDevice.Error()
	}
	return true, ""
}

// CgoEnabled reports whether this binary was built with cgo; without it the
// driver can never be loaded.
func CgoEnabled() bool { return cgoEnabled }

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (12080 for CUDA 12.8).
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	v, r := drvDriverGetVersion()
	return v, check("cuDriverGetVersion", r)
}

// IsNoGPU reports whether err says that no GPU can be used (no driver, no
// device, or no cgo) rather than that a GPU failed.
func IsNoGPU(err error) bool {
	return errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice)
}
