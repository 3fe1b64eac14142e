package mpi

import (
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/coll"
)

type opKind int

const (
	// opNone is the kind of the zero Op, which is no operation: bind
	// rejects it.
	opNone opKind = iota
	opSum
	opProd
	opMin
	opMax
	opLand
	opLor
	opLxor
	opBand
	opBor
	opBxor
	opMinLoc
	opMaxLoc
	opUser
	opReplace
	opNoOp
)

// Op is a reduction operation. The predefined ones are Sum, Prod, Min, Max,
// Land, Lor, Lxor, Band, Bor, Bxor, MinLoc and MaxLoc; NewOp makes
// user-defined ones. The zero Op is none of them: a reduction given it
// fails with ErrOp.
type Op struct {
	name        string
	kind        opKind
	commutative bool
	user        any // func(in, inout []T) for a user op on T
}

// Predefined operations. Sum and Prod apply to every numeric type; Min and
// Max to the ordered ones (not complex); the logical (Land, Lor, Lxor: 0
// is false, anything else true, results are 0 or 1) and bitwise ones to
// the integers; MinLoc and MaxLoc to ValueIndex pairs.
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
	// MinLoc keeps the smaller Value of two ValueIndex pairs, and the
	// smaller Index when the values are equal (MPI_MINLOC).
	MinLoc = Op{name: "minloc", kind: opMinLoc, commutative: true}
	// MaxLoc keeps the larger Value, and the smaller Index on a tie
	// (MPI_MAXLOC).
	MaxLoc = Op{name: "maxloc", kind: opMaxLoc, commutative: true}
	// Replace stores the origin's value in the target's element: the
	// operation of one-sided accumulates (MPI_REPLACE) that makes them
	// atomic Puts. Reductions reject it.
	Replace = Op{name: "replace", kind: opReplace, commutative: false}
	// NoOp leaves the target's element as it is: with GetAccumulate and
	// FetchAndOp, an atomic Get (MPI_NO_OP). Reductions and Accumulate
	// reject it.
	NoOp = Op{name: "no_op", kind: opNoOp, commutative: true}
)

// NewOp makes a user-defined operation on elements of T: f sets
// inout[i] = in[i] ⊕ inout[i], where in holds lower ranks' data. f must be
// associative. A non-commutative op is applied in rank order: the result
// is x0 ⊕ x1 ⊕ ... ⊕ x(n-1) with that grouping left to the algorithm.
// f may be called with any sub-range of the buffer, on scratch memory,
// from any goroutine.
func NewOp[T Element](name string, f func(in, inout []T), commutative bool) Op {
	return Op{name: name, kind: opUser, commutative: commutative, user: f}
}

// String is the operation's name.
func (o Op) String() string { return o.name }

// Commutative reports whether the operation may be applied in any order.
func (o Op) Commutative() bool { return o.commutative }

// byteOp adapts an elementwise function on bytes to coll.Op.
type byteOp struct {
	f    func(in, inout []byte)
	comm bool
}

func (b *byteOp) Apply(in, inout []byte) { b.f(in, inout) }
func (b *byteOp) Commutative() bool      { return b.comm }

// byteOp3 is a byteOp with a three-operand kernel (coll.Op3).
type byteOp3 struct {
	byteOp
	f3 func(in, inout, out []byte)
}

func (b *byteOp3) Apply3(in, inout, out []byte) { b.f3(in, inout, out) }

var _ coll.Op3 = (*byteOp3)(nil)

// opKey names a predefined operation on a type, for bound's cache.
type opKey struct {
	kind opKind
	t    reflect.Type
}

// bound caches the predefined operations bound to a type (opKey ->
// *boundEntry), so that a reduction allocates nothing to find its kernel.
var bound sync.Map

// boundFast is bound's first level, one entry per operation and
// reflect.Kind: finding a kernel in the sync.Map (hashing the key's
// interface) took a quarter of an 8-byte Allreduce's time in package mpi
// (100 of 390 ns on MPI_COMM_SELF). An entry is checked against the
// type, since named types share their kind (and every MinLoc pair is a
// struct); a miss falls back to bound and takes its entry over (the same
// pointer: two types of one kind used in turn allocate nothing).
var boundFast [opNoOp + 1][reflect.UnsafePointer + 1]atomic.Pointer[boundEntry]

type boundEntry struct {
	t  reflect.Type
	op coll.Op
}

// bind returns o as a coll.Op on elements of T, or an ErrOp error when o
// is the zero Op or not defined on T. Every call that takes an Op binds it
// before it communicates, so this is the one check of the Op.
func bind[T Element](op string, o Op) (coll.Op, error) {
	if o.kind == opNone {
		return nil, errorf(ErrOp, op, "the zero Op is not an operation (use Sum, Max, ... or NewOp)")
	}
	if o.kind == opReplace || o.kind == opNoOp {
		return nil, errorf(ErrOp, op, "%s is an operation of one-sided accumulates only", o.name)
	}
	var key opKey
	var fast *atomic.Pointer[boundEntry]
	if o.kind != opUser {
		t := reflect.TypeFor[T]()
		fast = &boundFast[o.kind][t.Kind()]
		if e := fast.Load(); e != nil && e.t == t {
			return e.op, nil
		}
		key = opKey{o.kind, t}
		if b, ok := bound.Load(key); ok {
			e := b.(*boundEntry)
			fast.Store(e)
			return e.op, nil
		}
	}
	var f func(in, inout []byte)
	var f3 func(in, inout, out []byte)
	if o.kind == opUser {
		uf, ok := o.user.(func(in, inout []T))
		if !ok {
			var z T
			return nil, errorf(ErrOp, op, "user op %q is not defined on %T", o.name, z)
		}
		if uf == nil {
			return nil, errorf(ErrOp, op, "user op %q has no function (NewOp with nil)", o.name)
		}
		f = func(in, inout []byte) { uf(bytesAs[T](in), bytesAs[T](inout)) }
	} else {
		f, f3 = kernel[T](o.kind)
	}
	if f == nil {
		var z T
		return nil, errorf(ErrOp, op, "operation %q is not defined on %T", o.name, z)
	}
	b := coll.Op(&byteOp{f: f, comm: o.commutative})
	if f3 != nil {
		b = &byteOp3{byteOp{f: f, comm: o.commutative}, f3}
	}
	if o.kind != opUser {
		e := &boundEntry{key.t, b}
		bound.Store(key, e)
		fast.Store(e)
	}
	return b, nil
}

// kernel returns the byte-level function of predefined operation k on T,
// and a three-operand one where there is a faster one (the vector sums),
// or nil when k does not apply to T. Named types (type Celsius float64)
// use their underlying type's kernel.
func kernel[T Element](k opKind) (func(in, inout []byte), func(in, inout, out []byte)) {
	if k == opSum {
		switch reflect.TypeFor[T]().Kind() {
		case reflect.Float32, reflect.Float64:
			if f, f3 := fastSum(elemSize[T](), true); f != nil {
				return f, f3
			}
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if f, f3 := fastSum(elemSize[T](), false); f != nil {
				return f, f3
			}
		}
	}
	return kernel2[T](k), nil
}

// kernel2 is kernel's portable two-operand function.
func kernel2[T Element](k opKind) func(in, inout []byte) {
	var z T
	switch any(z).(type) {
	case ValueIndex[int]:
		return loc[int](k)
	case ValueIndex[int8]:
		return loc[int8](k)
	case ValueIndex[int16]:
		return loc[int16](k)
	case ValueIndex[int32]:
		return loc[int32](k)
	case ValueIndex[int64]:
		return loc[int64](k)
	case ValueIndex[uint]:
		return loc[uint](k)
	case ValueIndex[uint8]:
		return loc[uint8](k)
	case ValueIndex[uint16]:
		return loc[uint16](k)
	case ValueIndex[uint32]:
		return loc[uint32](k)
	case ValueIndex[uint64]:
		return loc[uint64](k)
	case ValueIndex[uintptr]:
		return loc[uintptr](k)
	case ValueIndex[float32]:
		return loc[float32](k)
	case ValueIndex[float64]:
		return loc[float64](k)
	}
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int:
		return integer[int](k)
	case reflect.Int8:
		return integer[int8](k)
	case reflect.Int16:
		return integer[int16](k)
	case reflect.Int32:
		return integer[int32](k)
	case reflect.Int64:
		return integer[int64](k)
	case reflect.Uint:
		return integer[uint](k)
	case reflect.Uint8:
		return integer[uint8](k)
	case reflect.Uint16:
		return integer[uint16](k)
	case reflect.Uint32:
		return integer[uint32](k)
	case reflect.Uint64:
		return integer[uint64](k)
	case reflect.Uintptr:
		return integer[uintptr](k)
	case reflect.Float32:
		return float[float32](k)
	case reflect.Float64:
		return float[float64](k)
	case reflect.Complex64:
		return cplx[complex64](k)
	case reflect.Complex128:
		return cplx[complex128](k)
	}
	return nil
}

// view reinterprets b as elements of E (len(b) a multiple of E's size).
func view[E any](b []byte) []E {
	var z E
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

type intType interface {
	int | int8 | int16 | int32 | int64 | uint | uint8 | uint16 | uint32 | uint64 | uintptr
}

type floatType interface{ float32 | float64 }

type complexType interface{ complex64 | complex128 }

// wrapKernel turns an elementwise function on []E into one on bytes.
func wrapKernel[E any](f func(in, io []E)) func(in, inout []byte) {
	return func(in, inout []byte) {
		io := view[E](inout)
		f(view[E](in)[:len(io)], io)
	}
}

func sumOf[E intType | floatType | complexType]() func(in, io []E) {
	return func(in, io []E) {
		in = in[:len(io)]
		i := 0
		for ; i+4 <= len(io); i += 4 {
			io[i] += in[i]
			io[i+1] += in[i+1]
			io[i+2] += in[i+2]
			io[i+3] += in[i+3]
		}
		for ; i < len(io); i++ {
			io[i] = in[i] + io[i]
		}
	}
}

func prodOf[E intType | floatType | complexType]() func(in, io []E) {
	return func(in, io []E) {
		in = in[:len(io)]
		for i := range io {
			io[i] = in[i] * io[i]
		}
	}
}

// minOf and maxOf compute inout = (inout < in) ? inout : in, and the
// reverse, as Open MPI's kernels do, so that NaNs and signed zeros come
// out the same.
func minOf[E intType | floatType]() func(in, io []E) {
	return func(in, io []E) {
		in = in[:len(io)]
		for i := range io {
			if !(io[i] < in[i]) {
				io[i] = in[i]
			}
		}
	}
}

func maxOf[E intType | floatType]() func(in, io []E) {
	return func(in, io []E) {
		in = in[:len(io)]
		for i := range io {
			if !(io[i] > in[i]) {
				io[i] = in[i]
			}
		}
	}
}

func integer[E intType](k opKind) func(in, inout []byte) {
	b := func(v bool) E {
		if v {
			return 1
		}
		return 0
	}
	var f func(in, io []E)
	switch k {
	case opSum:
		f = sumOf[E]()
	case opProd:
		f = prodOf[E]()
	case opMin:
		f = minOf[E]()
	case opMax:
		f = maxOf[E]()
	case opLand:
		f = func(in, io []E) {
			for i := range io {
				io[i] = b(in[i] != 0 && io[i] != 0)
			}
		}
	case opLor:
		f = func(in, io []E) {
			for i := range io {
				io[i] = b(in[i] != 0 || io[i] != 0)
			}
		}
	case opLxor:
		f = func(in, io []E) {
			for i := range io {
				io[i] = b((in[i] != 0) != (io[i] != 0))
			}
		}
	case opBand:
		f = func(in, io []E) {
			for i := range io {
				io[i] &= in[i]
			}
		}
	case opBor:
		f = func(in, io []E) {
			for i := range io {
				io[i] |= in[i]
			}
		}
	case opBxor:
		f = func(in, io []E) {
			for i := range io {
				io[i] ^= in[i]
			}
		}
	default:
		return nil
	}
	return wrapKernel(f)
}

func float[E floatType](k opKind) func(in, inout []byte) {
	switch k {
	case opSum:
		return wrapKernel(sumOf[E]())
	case opProd:
		return wrapKernel(prodOf[E]())
	case opMin:
		return wrapKernel(minOf[E]())
	case opMax:
		return wrapKernel(maxOf[E]())
	}
	return nil
}

func cplx[E complexType](k opKind) func(in, inout []byte) {
	switch k {
	case opSum:
		return wrapKernel(sumOf[E]())
	case opProd:
		return wrapKernel(prodOf[E]())
	}
	return nil
}

func loc[V intType | floatType](k opKind) func(in, inout []byte) {
	switch k {
	case opMinLoc:
		return wrapKernel(func(in, io []ValueIndex[V]) {
			for i := range io {
				a, b := in[i], io[i]
				if a.Value < b.Value || (a.Value == b.Value && a.Index < b.Index) {
					io[i] = a
				}
			}
		})
	case opMaxLoc:
		return wrapKernel(func(in, io []ValueIndex[V]) {
			for i := range io {
				a, b := in[i], io[i]
				if a.Value > b.Value || (a.Value == b.Value && a.Index < b.Index) {
					io[i] = a
				}
			}
		})
	}
	return nil
}
