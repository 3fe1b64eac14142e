package cuda

import (
	"errors"
	"fmt"
)

// Result is a CUresult, the status code every CUDA driver call returns.
// A Result is itself an error, so that errors.Is(err, cuda.ErrorOutOfMemory)
// finds the code inside an *Error.
type Result int32

// The driver results this package and its callers test for; the full list is
// the CUresult enumeration of cuda.h.
const (
	Success                       Result = 0
	ErrorInvalidValue             Result = 1
	ErrorOutOfMemory              Result = 2
	ErrorNotInitialized           Result = 3
	ErrorNoDevice                 Result = 100
	ErrorInvalidDevice            Result = 101
	ErrorInvalidContext           Result = 201
	ErrorAlreadyMapped            Result = 208
	ErrorPeerAccessUnsupported    Result = 217
	ErrorInvalidPTX               Result = 218
	ErrorNotFound                 Result = 500
	ErrorNotReady                 Result = 600
	ErrorPeerAccessAlreadyEnabled Result = 704
	ErrorPeerAccessNotEnabled     Result = 705
	ErrorContextIsDestroyed       Result = 709
	ErrorNotSupported             Result = 801
	ErrorUnsupportedPTXVersion    Result = 222
	resultOutOfHostMemory         Result = ErrorOutOfMemory
)

// Name is the driver's name for r (cuGetErrorName), such as
// "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult(N)" when the driver is not loaded
// or does not know the code.
func (r Result) Name() string {
	if driverLoaded() {
		if s := drvGetErrorName(r); s != "" {
			return s
		}
	}
	if r == Success {
		return "CUDA_SUCCESS"
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// Error makes a Result an error: its name and the driver's description.
func (r Result) Error() string {
	if driverLoaded() {
		if s := drvGetErrorString(r); s != "" {
			return r.Name() + ": " + s
		}
	}
	return r.Name()
}

// Error is a failed driver call: the entry point that failed and its result.
type Error struct {
	// Call is the driver entry point, e.g. "cuMemAlloc_v2".
	Call string
	// Result is what it returned.
	Result Result
}

// Error reads "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY: out of memory".
func (e *Error) Error() string { return "cuda: " + e.Call + ": " + e.Result.Error() }

// Is lets errors.Is match an *Error against a bare Result.
func (e *Error) Is(target error) bool {
	r, ok := target.(Result)
	return ok && r == e.Result
}

// Unwrap returns the Result, so that errors.As finds it too.
func (e *Error) Unwrap() error { return e.Result }

// check turns a driver result into nil or an *Error naming the call.
func check(call string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Result: r}
}

// ErrNoDriver is returned (wrapped, with the reason) by Init and everything
// after it when the CUDA driver cannot be used: libcuda.so.1 is missing, too
// old, the binary was built without cgo, or cuInit failed.
var ErrNoDriver = errors.New("cuda: no usable CUDA driver")

// ErrNoDevice is returned (wrapped) by Init when the driver loads but sees no
// GPU (CUDA_ERROR_NO_DEVICE, e.g. CUDA_VISIBLE_DEVICES is empty).
var ErrNoDevice = errors.New("cuda: no CUDA device")
