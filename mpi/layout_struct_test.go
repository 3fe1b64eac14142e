package mpi

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

var typeOfP = reflect.TypeFor[structP]()

type structP struct {
	A int32
	B float64
	C [3]int16
	D struct{ X, Y float32 }
	E uint8
}

// TestFields checks Fields' type map against the fields' own bytes, with
// Pack over Bytes: the named fields, in the order named, of each struct,
// and neither padding nor the fields left out.
func TestFields(t *testing.T) {
	ps := []structP{{A: 1, B: 2.5, C: [3]int16{3, 4, 5}, E: 9}, {A: -1, B: -2.5, C: [3]int16{-3, -4, -5}, E: 7}}
	ps[0].D.X, ps[0].D.Y = 6, 7
	ps[1].D.X, ps[1].D.Y = -6, -7
	b, err := Bytes(ps)
	if err != nil {
		t.Fatal(err)
	}
	// The fields' bytes, read through the fields themselves (not through
	// fieldAt, which Fields uses).
	raw := func(p unsafe.Pointer, n uintptr) []byte { return unsafe.Slice((*byte)(p), n) }
	field := map[string]func(p *structP) []byte{
		"A":   func(p *structP) []byte { return raw(unsafe.Pointer(&p.A), unsafe.Sizeof(p.A)) },
		"B":   func(p *structP) []byte { return raw(unsafe.Pointer(&p.B), unsafe.Sizeof(p.B)) },
		"C":   func(p *structP) []byte { return raw(unsafe.Pointer(&p.C), unsafe.Sizeof(p.C)) },
		"D":   func(p *structP) []byte { return raw(unsafe.Pointer(&p.D), unsafe.Sizeof(p.D)) },
		"D.Y": func(p *structP) []byte { return raw(unsafe.Pointer(&p.D.Y), unsafe.Sizeof(p.D.Y)) },
		"E":   func(p *structP) []byte { return raw(unsafe.Pointer(&p.E), unsafe.Sizeof(p.E)) },
	}
	one := func(p *structP, names ...string) []byte {
		var out []byte
		for _, n := range names {
			out = append(out, field[n](p)...)
		}
		return out
	}
	for _, names := range [][]string{{"B", "D.Y"}, {"E", "A"}, {"C", "D"}, nil} {
		l := Fields[structP](names...)
		if l.Err() != nil {
			t.Fatalf("Fields(%v): %v", names, l.Err())
		}
		all := names
		if all == nil {
			all = []string{"A", "B", "C", "D", "E"}
		}
		got, err := Pack(nil, b, Contiguous(2).Of(l))
		if err != nil {
			t.Fatal(err)
		}
		want := append(one(&ps[0], all...), one(&ps[1], all...)...)
		if string(got) != string(want) {
			t.Errorf("Fields(%v) packed %v, want %v", names, got, want)
		}
		if l.Extent() != int(typeOfP.Size()) {
			t.Errorf("Fields(%v): extent %d, want the struct's %d", names, l.Extent(), typeOfP.Size())
		}
	}
	if n := Fields[structP]().Size(); n != 4+8+6+8+1 {
		t.Errorf("Fields() selects %d bytes, want 27 (no padding)", n)
	}
	if err := Fields[structP]("Z").Err(); !errors.Is(err, ErrArg) {
		t.Errorf("unknown field: %v, want ErrArg", err)
	}
	if err := Fields[structP]("A.X").Err(); !errors.Is(err, ErrArg) {
		t.Errorf("a field of an int32: %v, want ErrArg", err)
	}
	type withPtr struct {
		A int
		S string
	}
	if err := Fields[withPtr]("A").Err(); !errors.Is(err, ErrType) {
		t.Errorf("a struct with a string: %v, want ErrType", err)
	}
	if _, err := Bytes([]withPtr{{}}); !errors.Is(err, ErrType) {
		t.Errorf("Bytes of a struct with a string: %v, want ErrType", err)
	}
	if err := Fields[int64]().Err(); !errors.Is(err, ErrType) {
		t.Errorf("Fields of int64: %v, want ErrType", err)
	}
}
