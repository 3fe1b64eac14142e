package mpi

import "unsafe"

// Numeric is every element type a buffer may have.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// sizeOf is the size in bytes of one element of T.
func sizeOf[T Numeric]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// asBytes views buf's elements as bytes, without copying.
func asBytes[T Numeric](buf []T) []byte {
	if len(buf) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*sizeOf[T]())
}

// fromBytes views b as elements of T (b's length must be a multiple).
func fromBytes[T Numeric](b []byte) []T {
	n := len(b) / sizeOf[T]()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
