//go:build !amd64

package sm

import "unsafe"

func demote(unsafe.Pointer, int) {}

const canDemote = false
