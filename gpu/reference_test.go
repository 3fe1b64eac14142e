package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// refReduce computes a op b elementwise on the CPU, over little-endian
// element bytes: the reference the kernels must match bit for bit.
func refReduce(op Op, dt DType, a, b []byte) []byte {
	out := make([]byte, len(a))
	le := binary.LittleEndian
	switch dt {
	case Float32:
		for i := 0; i < len(a); i += 4 {
			x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
			var r float32
			switch op {
			case Sum:
				r = x + y
			case Prod:
				r = x * y
			case Min:
				r = x
				if y < x {
					r = y
				}
			case Max:
				r = x
				if y > x {
					r = y
				}
			}
			le.PutUint32(out[i:], math.Float32bits(r))
		}
	case Float64:
		for i := 0; i < len(a); i += 8 {
			x, y := math.Float64frombits(le.Uint64(a[i:])), math.Float64frombits(le.Uint64(b[i:]))
			var r float64
			switch op {
			case Sum:
				r = x + y
			case Prod:
				r = x * y
			case Min:
				r = math.Min(x, y)
			case Max:
				r = math.Max(x, y)
			}
			le.PutUint64(out[i:], math.Float64bits(r))
		}
	case Float16, BFloat16:
		f := fmtF16
		if dt == BFloat16 {
			f = fmtBF16
		}
		for i := 0; i < len(a); i += 2 {
			xa, xb := le.Uint16(a[i:]), le.Uint16(b[i:])
			x, y := f.decode(xa), f.decode(xb)
			var r uint16
			switch op {
			case Sum:
				r = f.fromFloat64(x + y) // exact in float64 for the test's operands
			case Prod:
				r = f.fromFloat64(x * y) // exact: 11 or 8 significant bits each
			case Min:
				r = xa
				if y < x {
					r = xb
				}
			case Max:
				r = xa
				if y > x {
					r = xb
				}
			}
			le.PutUint16(out[i:], r)
		}
	case Int32:
		for i := 0; i < len(a); i += 4 {
			x, y := int32(le.Uint32(a[i:])), int32(le.Uint32(b[i:]))
			var r int32
			switch op {
			case Sum:
				r = x + y
			case Prod:
				r = x * y
			case Min:
				r = min(x, y)
			case Max:
				r = max(x, y)
			}
			le.PutUint32(out[i:], uint32(r))
		}
	case Int64:
		for i := 0; i < len(a); i += 8 {
			x, y := int64(le.Uint64(a[i:])), int64(le.Uint64(b[i:]))
			var r int64
			switch op {
			case Sum:
				r = x + y
			case Prod:
				r = x * y
			case Min:
				r = min(x, y)
			case Max:
				r = max(x, y)
			}
			le.PutUint64(out[i:], uint64(r))
		}
	case Uint8:
		for i := range a {
			x, y := a[i], b[i]
			var r uint8
			switch op {
			case Sum:
				r = x + y
			case Prod:
				r = x * y
			case Min:
				r = min(x, y)
			case Max:
				r = max(x, y)
			}
			out[i] = r
		}
	}
	return out
}

// randomElements returns count random elements of dt as bytes: floats
// uniform in ±(0.001, 4) with random sign (no zeros, no NaNs, so min, max and
// signed zeros are unambiguous; products of small halves reach subnormals),
// integers over their whole range.
func randomElements(rng *rand.Rand, dt DType, count int) []byte {
	b := make([]byte, count*dt.Size())
	le := binary.LittleEndian
	val := func() float64 {
		v := 0.001 + rng.Float64()*3.999
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	for i := 0; i < count; i++ {
		switch dt {
		case Float32:
			le.PutUint32(b[i*4:], math.Float32bits(float32(val())))
		case Float64:
			le.PutUint64(b[i*8:], math.Float64bits(val()))
		case Float16:
			le.PutUint16(b[i*2:], fmtF16.fromFloat64(val()))
		case BFloat16:
			le.PutUint16(b[i*2:], fmtBF16.fromFloat64(val()))
		case Int32:
			le.PutUint32(b[i*4:], rng.Uint32())
		case Int64:
			le.PutUint64(b[i*8:], rng.Uint64())
		case Uint8:
			b[i] = byte(rng.Uint32())
		}
	}
	return b
}
