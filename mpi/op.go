package mpi

import (
	"fmt"

	"github.com/gorun/gorun/coll"
)

type opKind int

const (
	opSum opKind = iota
	opProd
	opMin
	opMax
	opLand
	opLor
	opLxor
	opBand
	opBor
	opBxor
	opUser
)

// Op is a reduction operation. The predefined ones are Sum, Prod, Min, Max,
// Land, Lor, Lxor, Band, Bor and Bxor; NewOp makes user-defined ones.
type Op struct {
	name        string
	kind        opKind
	commutative bool
	user        any // func(in, inout []T) for a user op on T
}

// Predefined operations. Min and Max need an ordered type (not complex);
// the logical and bitwise ones an integer type.
var (
	Sum  = Op{name: "sum", kind: opSum, commutative: true}
	Prod = Op{name: "prod", kind: opProd, commutative: true}
	Min  = Op{name: "min", kind: opMin, commutative: true}
	Max  = Op{name: "max", kind: opMax, commutative: true}
	Land = Op{name: "land", kind: opLand, commutative: true}
	Lor  = Op{name: "lor", kind: opLor, commutative: true}
	Lxor = Op{name: "lxor", kind: opLxor, commutative: true}
	Band = Op{name: "band", kind: opBand, commutative: true}
	Bor  = Op{name: "bor", kind: opBor, commutative: true}
	Bxor = Op{name: "bxor", kind: opBxor, commutative: true}
)

// NewOp makes a user-defined operation on elements of T: f sets
// inout[i] = in[i] ⊕ inout[i], where in holds lower ranks' data. A
// non-commutative op is applied in rank order.
func NewOp[T Numeric](name string, f func(in, inout []T), commutative bool) Op {
	return Op{name: name, kind: opUser, commutative: commutative, user: f}
}

// String is the operation's name.
func (o Op) String() string { return o.name }

// typedOp adapts an Op on T to coll's byte interface.
type typedOp[T Numeric] struct {
	f    func(in, inout []T)
	comm bool
}

func (t typedOp[T]) Apply(in, inout []byte) { t.f(fromBytes[T](in), fromBytes[T](inout)) }
func (t typedOp[T]) Commutative() bool      { return t.comm }

// bind returns o as a coll.Op on T, or an ErrOp error when o is not defined
// on T.
func bind[T Numeric](op string, o Op) (coll.Op, error) {
	var f func(in, inout []T)
	if o.kind == opUser {
		uf, ok := o.user.(func(in, inout []T))
		if !ok {
			var z T
			return nil, errorf(ErrOp, op, "user op %q is not defined on %T", o.name, z)
		}
		f = uf
	} else {
		f = builtin[T](o.kind)
	}
	if f == nil {
		var z T
		return nil, errorf(ErrOp, op, "operation %q is not defined on %T", o.name, z)
	}
	return typedOp[T]{f: f, comm: o.commutative}, nil
}

// builtin returns the elementwise function of a predefined operation on T,
// or nil when it does not apply to T.
func builtin[T Numeric](k opKind) func(in, inout []T) {
	switch k {
	case opSum:
		return func(in, io []T) {
			for i := range io {
				io[i] = in[i] + io[i]
			}
		}
	case opProd:
		return func(in, io []T) {
			for i := range io {
				io[i] = in[i] * io[i]
			}
		}
	}
	var z T
	switch any(z).(type) {
	case int:
		return ordered[int](k).(func(in, io []T))
	case int8:
		return ordered[int8](k).(func(in, io []T))
	case int16:
		return ordered[int16](k).(func(in, io []T))
	case int32:
		return ordered[int32](k).(func(in, io []T))
	case int64:
		return ordered[int64](k).(func(in, io []T))
	case uint:
		return ordered[uint](k).(func(in, io []T))
	case uint8:
		return ordered[uint8](k).(func(in, io []T))
	case uint16:
		return ordered[uint16](k).(func(in, io []T))
	case uint32:
		return ordered[uint32](k).(func(in, io []T))
	case uint64:
		return ordered[uint64](k).(func(in, io []T))
	case uintptr:
		return ordered[uintptr](k).(func(in, io []T))
	case float32:
		if f, ok := floatOp[float32](k).(func(in, io []T)); ok {
			return f
		}
	case float64:
		if f, ok := floatOp[float64](k).(func(in, io []T)); ok {
			return f
		}
	}
	return nil
}

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

func floatOp[T ~float32 | ~float64](k opKind) any {
	switch k {
	case opMin:
		return func(in, io []T) {
			for i := range io {
				io[i] = min(in[i], io[i])
			}
		}
	case opMax:
		return func(in, io []T) {
			for i := range io {
				io[i] = max(in[i], io[i])
			}
		}
	}
	return nil
}

func ordered[T integer](k opKind) any {
	b := func(v bool) T {
		if v {
			return 1
		}
		return 0
	}
	switch k {
	case opMin:
		return func(in, io []T) {
			for i := range io {
				io[i] = min(in[i], io[i])
			}
		}
	case opMax:
		return func(in, io []T) {
			for i := range io {
				io[i] = max(in[i], io[i])
			}
		}
	case opLand:
		return func(in, io []T) {
			for i := range io {
				io[i] = b(in[i] != 0 && io[i] != 0)
			}
		}
	case opLor:
		return func(in, io []T) {
			for i := range io {
				io[i] = b(in[i] != 0 || io[i] != 0)
			}
		}
	case opLxor:
		return func(in, io []T) {
			for i := range io {
				io[i] = b((in[i] != 0) != (io[i] != 0))
			}
		}
	case opBand:
		return func(in, io []T) {
			for i := range io {
				io[i] = in[i] & io[i]
			}
		}
	case opBor:
		return func(in, io []T) {
			for i := range io {
				io[i] = in[i] | io[i]
			}
		}
	case opBxor:
		return func(in, io []T) {
			for i := range io {
				io[i] = in[i] ^ io[i]
			}
		}
	}
	panic(fmt.Sprintf("mpi: unknown op kind %d", k))
}
