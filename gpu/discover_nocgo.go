//go:build !cgo

package gpu

import "errors"

// nvmlDiscover needs cgo (go-nvml loads libnvidia-ml.so.1 through it).
func nvmlDiscover(*Topology) error {
	return errors.New("built without cgo (CGO_ENABLED=0): GPU support is off")
}
