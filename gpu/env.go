package gpu

import "os"

// Param is one of the package's tunables: an environment variable, its
// default and what it does, for `gorun --help-params`.
type Param struct {
	Name, Default, Doc string
}

// Params lists the package's tunables.
func Params() []Param {
	return []Param{
		{envPTX, "(embedded)", "load the reduce kernels from this PTX file instead of the PTX embedded in the binary (for kernel development)"},
		{envProbeBytes, "268435456", "bytes per copy when `gorun --topo --probe` measures GPU pair bandwidth"},
	}
}

const (
	envPTX        = "GORUN_GPU_PTX"
	envProbeBytes = "GORUN_GPU_PROBE_BYTES"
)

// getenv returns the variable's value, or def when it is unset or empty.
func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
