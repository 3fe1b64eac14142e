package gpu

import (
	"os"
	"regexp"
	"slices"
	"strings"
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

// TestServeCodes checks that the resident kernel's codes of the element
// types and operations (kernels/reduce.cu: SV_T_* and OP_*, each an
// index) list serveTypes and serveOps in their order: serveCall hands the
// kernel their indexes.
func TestServeCodes(t *testing.T) {
	src, err := os.ReadFile("kernels/reduce.cu")
	if err != nil {
		t.Fatal(err)
	}
	enum := func(first string) []string {
		m := regexp.MustCompile(`enum \{ (` + first + `[^}]*)\}`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("reduce.cu has no enum beginning %s", first)
		}
		var names []string
		for _, f := range strings.Split(string(m[1]), ",") {
			names = append(names, strings.TrimSpace(f))
		}
		return names
	}
	var types, ops []string
	for _, dt := range serveTypes {
		types = append(types, "SV_T_"+dt.kernelName())
	}
	for _, op := range serveOps {
		ops = append(ops, "OP_"+strings.ToUpper(op.String()))
	}
	if got := enum("SV_T_"); !slices.Equal(got, types) {
		t.Errorf("reduce.cu's type codes are %v; serveTypes gives %v", got, types)
	}
	if got := enum("OP_"); !slices.Equal(got, ops) {
		t.Errorf("reduce.cu's operation codes are %v; serveOps gives %v", got, ops)
	}
}
