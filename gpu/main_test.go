package gpu

import (
	"fmt"
	"os"
	"testing"
)

// childEnv, when set, makes the test binary act as a helper process of a GPU
// test instead of running tests: the value names the role.
const childEnv = "GORUN_GPU_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintf(os.Stderr, "gpu test child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	stopBenchPeer()
	os.Exit(code)
}

// runChild runs the helper process role.
func runChild(role string) error {
	switch role {
	case "ipc":
		return ipcChild()
	case "bench":
		return benchChild()
	}
	return fmt.Errorf("unknown role %q", role)
}

// requireGPU skips a test on machines without a usable GPU, saying why.
func requireGPU(tb testing.TB, n int) int {
	tb.Helper()
	if ok, why := Available(); !ok {
		tb.Skip("no GPU: " + why)
	}
	count, err := DeviceCount()
	if err != nil {
		tb.Skip(err.Error())
	}
	if count < n {
		tb.Skipf("needs %d GPUs, this machine has %d", n, count)
	}
	return count
}
