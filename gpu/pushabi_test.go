package gpu

import (
	"testing"

	"github.com/gorun/gorun/gpu/kernels"
)

// TestEmbeddedPushKernels: the embedded PTX's push kernels take the
// parameters PushCall passes (a PTX regenerated from an older reduce.cu
// would make every push collective fall back to the ipc algorithms).
func TestEmbeddedPushKernels(t *testing.T) {
	if !kernels.PushCurrent(kernels.ReducePTX) {
		t.Errorf("embedded reduce.ptx has push kernels without done; regenerate it (docs/gpu.md)")
	}
	if kernels.PushCurrent([]byte(".visible .entry gorun_bcpush(\n\t.param .u64 gorun_bcpush_param_12\n)")) {
		t.Errorf("a PTX whose gorun_bcpush has 13 parameters passes as current")
	}
	if !kernels.ServeCurrent(kernels.ReducePTX) {
		t.Errorf("embedded reduce.ptx has a resident kernel without start_ns; regenerate it (docs/gpu.md)")
	}
	if kernels.ServeCurrent([]byte(".visible .entry gorun_serve(\n\t.param .u64 gorun_serve_param_4\n)")) {
		t.Errorf("a PTX whose gorun_serve has 5 parameters passes as current")
	}
	// Two data words per (rank, block), an acknowledgement per rank, a
	// progress word per block, the count of blocks done.
	if got, want := PushWordBytes(2), 8*(2*2*128+2+128+1); got != want {
		t.Errorf("PushWordBytes(2) = %d, want %d", got, want)
	}
}
