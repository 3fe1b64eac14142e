package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHeat runs examples/heat on several process grids (uneven blocks
// included) and checks that each prints exactly what its serial solver
// prints: the same sweeps, residual and grid checksum, bit for bit.
func TestHeat(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "heat")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/heat").CombinedOutput(); err != nil {
		t.Fatalf("build examples/heat: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"-n", "50", "-iters", "400"}, {"-n", "37", "-tol", "1e-3"}} {
		want, err := execOut(bin, nil, append([]string{"-serial"}, args...)...)
		if err != nil {
			t.Fatalf("serial heat: %v\n%s", err, want)
		}
		for _, np := range []int{1, 2, 4, 6} {
			t.Run(fmt.Sprintf("np=%d/%v", np, args), func(t *testing.T) {
				got := job{np: np, args: append([]string{bin}, args...)}.ok(t).stdout
				if got != want {
					t.Fatalf("gorun -np %d heat %v:\n%s\nserial:\n%s", np, args, got, want)
				}
			})
		}
	}
}
