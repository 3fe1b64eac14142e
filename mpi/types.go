package mpi

// Numeric is every numeric element type; Element (element.go) adds the
// value-index pairs of MinLoc and MaxLoc.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}
