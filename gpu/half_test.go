package gpu

import (
	"math"
	"testing"
)

// Reference conversions between float64 and the 16-bit float formats, with
// round-to-nearest-even, subnormals and overflow to infinity: the CPU side
// of the kernel tests.

// halfFormat describes a binary floating-point format of 16 bits.
type halfFormat struct {
	mbits, emin, emax, bias int
}

var (
	fmtF16  = halfFormat{mbits: 10, emin: -14, emax: 15, bias: 15}
	fmtBF16 = halfFormat{mbits: 7, emin: -126, emax: 127, bias: 127}
)

// round returns the representable value of f nearest x (ties to even), or
// ±Inf past the largest finite value.
func (f halfFormat) round(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	_, exp := math.Frexp(x) // x = fr * 2^exp, 0.5 <= |fr| < 1
	e := exp - 1
	if e < f.emin {
		e = f.emin
	}
	q := math.Ldexp(1, e-f.mbits)
	r := math.RoundToEven(x/q) * q
	maxFinite := math.Ldexp(2-math.Ldexp(1, -f.mbits), f.emax)
	if math.Abs(r) > maxFinite {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// encode returns the bits of x, which must be representable (from round).
func (f halfFormat) encode(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 1 << 15
		x = -x
	}
	expAll := uint16(1<<(15-f.mbits) - 1)
	switch {
	case math.IsNaN(x):
		return expAll<<f.mbits | 1<<(f.mbits-1)
	case math.IsInf(x, 0):
		return sign | expAll<<f.mbits
	case x == 0:
		return sign
	}
	_, exp := math.Frexp(x)
	e := exp - 1
	if e < f.emin { // subnormal
		m := x / math.Ldexp(1, f.emin-f.mbits)
		return sign | uint16(m)
	}
	m := (x/math.Ldexp(1, e) - 1) * math.Ldexp(1, f.mbits)
	return sign | uint16(e+f.bias)<<f.mbits | uint16(m)
}

// decode returns the value of bits v.
func (f halfFormat) decode(v uint16) float64 {
	sign := 1.0
	if v&(1<<15) != 0 {
		sign = -1
	}
	ebits := int(v>>f.mbits) & (1<<(15-f.mbits) - 1)
	m := float64(v & (1<<f.mbits - 1))
	switch {
	case ebits == 1<<(15-f.mbits)-1:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case ebits == 0:
		return sign * m * math.Ldexp(1, f.emin-f.mbits)
	}
	return sign * (1 + m/math.Ldexp(1, f.mbits)) * math.Ldexp(1, ebits-f.bias)
}

// fromFloat64 rounds x into the format's bits.
func (f halfFormat) fromFloat64(x float64) uint16 { return f.encode(f.round(x)) }

func TestHalfConversions(t *testing.T) {
	cases := []struct {
		f    halfFormat
		x    float64
		bits uint16
	}{
		{fmtF16, 1, 0x3c00},
		{fmtF16, -2, 0xc000},
		{fmtF16, 65504, 0x7bff},
		{fmtF16, 65520, 0x7c00},                  // halfway past max: to Inf
		{fmtF16, math.Ldexp(1, -24), 0x0001},     // smallest subnormal
		{fmtF16, math.Ldexp(1, -25), 0x0000},     // halfway to zero: even
		{fmtF16, math.Ldexp(3, -26), 0x0001},     // 0.75 ulp rounds up
		{fmtF16, 1 + math.Ldexp(1, -11), 0x3c00}, // tie to even
		{fmtF16, 1 + math.Ldexp(3, -11), 0x3c02}, // tie to even, up
		{fmtF16, math.Ldexp(1, -14), 0x0400},     // smallest normal
		{fmtBF16, 1, 0x3f80},
		{fmtBF16, -3.5, 0xc060},
		{fmtBF16, float64(math.Float32frombits(0x3f808000)), 0x3f80}, // tie to even
		{fmtBF16, float64(math.Float32frombits(0x3f818000)), 0x3f82},
	}
	for _, c := range cases {
		if got := c.f.fromFloat64(c.x); got != c.bits {
			t.Errorf("fromFloat64(%g) = %#04x, want %#04x", c.x, got, c.bits)
		}
	}
	for _, f := range []halfFormat{fmtF16, fmtBF16} {
		for v := 0; v < 1<<16; v++ {
			x := f.decode(uint16(v))
			if math.IsNaN(x) {
				continue
			}
			if got := f.fromFloat64(x); got != uint16(v) {
				t.Fatalf("format %+v: round trip of %#04x (%g) gave %#04x", f, v, x, got)
			}
		}
	}
}
