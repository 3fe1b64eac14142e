package gpu

import "fmt"

// DType is the element type of a device buffer: what the reduce kernels
// compute on and what the mpi layer maps its datatypes to.
type DType uint8

// The element types the project's kernels support. The zero DType is
// invalid, so a Buffer built without a type is caught.
const (
	Float32 DType = iota + 1
	Float64
	Float16  // IEEE 754 binary16
	BFloat16 // bfloat16: float32's top 16 bits
	Int32
	Int64
	Uint8
)

var dtypeInfo = [...]struct {
	name   string // as users write it
	kernel string // in kernel names (kernels.ReduceTypes)
	size   int
}{
	Float32:  {"float32", "f32", 4},
	Float64:  {"float64", "f64", 8},
	Float16:  {"float16", "f16", 2},
	BFloat16: {"bfloat16", "bf16", 2},
	Int32:    {"int32", "i32", 4},
	Int64:    {"int64", "i64", 8},
	Uint8:    {"uint8", "u8", 1},
}

// DTypes lists every valid DType.
var DTypes = []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Uint8}

// Valid reports whether t is one of DTypes.
func (t DType) Valid() bool { return t >= Float32 && t <= Uint8 }

// Size returns the size of one element in bytes (0 for an invalid DType).
func (t DType) Size() int {
	if !t.Valid() {
		return 0
	}
	return dtypeInfo[t].size
}

// String returns the type's name ("float32", "bfloat16", ...).
func (t DType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("DType(%d)", uint8(t))
	}
	return dtypeInfo[t].name
}

// kernelName is the type's short name in kernel names ("f32").
func (t DType) kernelName() string { return dtypeInfo[t].kernel }

// ParseDType returns the DType named s (as String writes it).
func ParseDType(s string) (DType, error) {
	for _, t := range DTypes {
		if t.String() == s || t.kernelName() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gpu: unknown element type %q", s)
}

// Element is the Go types whose slices Upload and Download move to and from
// device buffers. float16 and bfloat16 travel as their raw uint16 bits.
type Element interface {
	float32 | float64 | int32 | int64 | uint8 | uint16
}

// DTypeOf returns the DType of Go element type T; uint16 has none (it may be
// Float16 or BFloat16) and returns 0.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	}
	return 0
}
