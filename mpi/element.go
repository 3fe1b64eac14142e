package mpi

import (
	"unsafe"
)

// Ordered is every numeric type with an order: the types MinLoc and
// MaxLoc compare.
type Ordered interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// ValueIndex is a value and the index it belongs to: the element of the
// MinLoc and MaxLoc reductions (MPI's MPI_DOUBLE_INT, MPI_2INT, ...).
type ValueIndex[T Ordered] struct {
	Value T
	Index int
}

// Element is every type a collective's buffer may hold: the numeric types
// and the value-index pairs of MinLoc and MaxLoc. Point-to-point buffers
// are Numeric.
type Element interface {
	Numeric | ValueIndex[int] | ValueIndex[int8] | ValueIndex[int16] | ValueIndex[int32] | ValueIndex[int64] |
		ValueIndex[uint] | ValueIndex[uint8] | ValueIndex[uint16] | ValueIndex[uint32] | ValueIndex[uint64] |
		ValueIndex[uintptr] | ValueIndex[float32] | ValueIndex[float64]
}

// elemSize is the size in bytes of one element of T.
func elemSize[T Element]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// elemBytes views buf's elements as bytes, without copying. The result is
// never nil (package coll reads a nil buffer as "in place").
func elemBytes[T Element](buf []T) []byte {
	if len(buf) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*elemSize[T]())
}

// bytesAs views b as elements of T (b's length must be a multiple).
func bytesAs[T Element](b []byte) []T {
	n := len(b) / elemSize[T]()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// overlap describes how two buffers share memory.
type overlap int

const (
	disjoint overlap = iota
	same             // the same memory, same length
	partial          // any other sharing
)

// aliasing compares the memory of two byte views.
func aliasing(a, b []byte) overlap {
	if len(a) == 0 || len(b) == 0 {
		return disjoint
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	switch {
	case pa == pb && len(a) == len(b):
		return same
	case pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a)):
		return partial
	}
	return disjoint
}

// within reports whether sub is exactly buf[off:off+len(sub)].
func within(sub, buf []byte, off int) bool {
	if len(sub) == 0 || off < 0 || off+len(sub) > len(buf) {
		return false
	}
	return unsafe.SliceData(sub) == &buf[off]
}
