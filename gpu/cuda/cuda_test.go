package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorNamesCallAndResult(t *testing.T) {
	err := fmt.Errorf("device 3: %w", check("cuMemAlloc_v2", ErrorOutOfMemory))
	if !errors.Is(err, ErrorOutOfMemory) {
		t.Errorf("errors.Is(%v, ErrorOutOfMemory) is false", err)
	}
	if errors.Is(err, ErrorInvalidValue) {
		t.Errorf("errors.Is(%v, ErrorInvalidValue) is true", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc_v2" {
		t.Errorf("errors.As: %+v", ce)
	}
	msg := err.Error()
	if !strings.Contains(msg, "cuMemAlloc_v2") {
		t.Errorf("message %q does not name the call", msg)
	}
	// The driver names the code when it is loaded; without it the number
	// stands in.
	if !strings.Contains(msg, "CUDA_ERROR_OUT_OF_MEMORY") && !strings.Contains(msg, "CUresult(2)") {
		t.Errorf("message %q does not name the result", msg)
	}
	if check("cuInit", Success) != nil {
		t.Error("check(Success) is not nil")
	}
}

// TestInitWithoutGPU runs where there is no driver or GPU (CI): Init must
// say so with a reason, and calls after it must fail the same way.
func TestInitWithoutGPU(t *testing.T) {
	err := Init()
	if err == nil {
		t.Skip("this machine has a CUDA driver and device")
	}
	if !IsNoGPU(err) {
		t.Fatalf("Init: %v does not wrap ErrNoDriver or ErrNoDevice", err)
	}
	t.Logf("Init: %v", err)
	if _, err := DeviceCount(); !IsNoGPU(err) {
		t.Errorf("DeviceCount: %v", err)
	}
	if _, err := PrimaryContext(0); !IsNoGPU(err) {
		t.Errorf("PrimaryContext: %v", err)
	}
	if ok, why := Available(); ok || why == "" {
		t.Errorf("Available() = %v, %q", ok, why)
	}
	if !CgoEnabled() && !strings.Contains(err.Error(), "cgo") {
		t.Errorf("without cgo, Init should say so: %v", err)
	}
}

func TestLaunchRejectsAmbiguousArgs(t *testing.T) {
	s := &Stream{ctx: &Context{}}
	f := &Function{name: "k"}
	if err := s.Launch(f, D1(1), D1(1), 0, 3); !errors.Is(err, ErrorInvalidValue) {
		t.Errorf("Launch with an int argument: %v", err)
	}
	args := make([]any, 17)
	for i := range args {
		args[i] = int32(i)
	}
	if err := s.Launch(f, D1(1), D1(1), 0, args...); !errors.Is(err, ErrorInvalidValue) {
		t.Errorf("Launch with 17 arguments: %v", err)
	}
}
