//go:build cgo && ofi

package ofi_test

import (
	"os"
	"testing"

	"github.com/gorun/gorun/btl/btltest"
	_ "github.com/gorun/gorun/btl/ofi"
)

// TestMain selects libfabric's tcp provider, which the module otherwise
// leaves to btl/tcp; the suite's child processes inherit it.
func TestMain(m *testing.M) {
	if os.Getenv("GORUN_OFI_PROVIDER") == "" {
		os.Setenv("GORUN_OFI_PROVIDER", "tcp;ofi_rxm")
	}
	// A dead peer shows as a provider that cannot connect to it: keep
	// the death cases short (the suite's connect case does the same).
	if os.Getenv("GORUN_OFI_CONNECT_TIMEOUT") == "" {
		os.Setenv("GORUN_OFI_CONNECT_TIMEOUT", "2s")
	}
	os.Exit(m.Run())
}

func TestOFI(t *testing.T) { btltest.Run(t, btltest.Transport{Name: "ofi"}) }

func BenchmarkOFI(b *testing.B) { btltest.Bench(b, btltest.Transport{Name: "ofi"}) }
