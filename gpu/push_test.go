package gpu

import (
	"slices"
	"testing"

	"github.com/gorun/gorun/gpu/kernels"
)

// TestEmbeddedPushPTX checks that the embedded PTX defines every push
// kernel HasPushKernels asks for (allreduce, reduce-scatter, reduce,
// allgather, bcast) and the resident kernel (Server): without one, every
// push algorithm falls back to its ipc or p2p one, or launches its
// kernels.
func TestEmbeddedPushPTX(t *testing.T) {
	entries := kernels.Entries(kernels.ReducePTX)
	want := []string{kernels.AllgatherPushName, kernels.BcastPushName, kernels.ServeName}
	for _, op := range Ops {
		for _, dt := range DTypes {
			o, ty := op.String(), dt.kernelName()
			want = append(want, kernels.AllreducePushName(o, ty), kernels.ReduceScatterPushName(o, ty), kernels.ReducePushName(o, ty))
		}
	}
	for _, name := range want {
		if !slices.Contains(entries, name) {
			t.Errorf("embedded reduce.ptx lacks %s; regenerate it (docs/gpu.md)", name)
		}
	}
}
