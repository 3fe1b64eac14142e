package mpi

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// Struct layouts: MPI_Type_create_struct in Go terms.
//
// A slice of Go structs holds several element types, which a Layout (one
// element type per slice) cannot name. Its bytes can: Bytes views a []T
// of a pointer-free struct type as its bytes, without a copy, and Fields
// gives the layout, in bytes, of some fields of one T, with T's size as
// its extent, so that Contiguous(n).Of(Fields[T](...)) names those fields
// in n consecutive structs, and every other layout composes with it (a
// Vector of it takes every k-th struct). Padding and the fields left out
// are neither sent nor overwritten. MPI's hvector and hindexed (byte
// strides and displacements) are Vector and Indexed applied to bytes.
//
// Both ends must agree on the struct's layout in memory: the same Go type
// compiled for the same architecture, as in every gorun job.

// Bytes returns the memory of s as bytes, without a copy, for the layouts
// of Fields: len(s)*size of T bytes, aliasing s. T must hold no pointers
// (no pointer, slice, map, string, interface, channel or function, at any
// depth): their bytes mean nothing in another process, and writing them
// would corrupt this one. It fails with ErrType otherwise.
func Bytes[T any](s []T) ([]byte, error) {
	t := reflect.TypeFor[T]()
	if p := pointerIn(t, t.String()); p != "" {
		return nil, errorf(ErrType, "Bytes", "%s holds %s: only pointer-free types travel as bytes", t, p)
	}
	if len(s) == 0 || t.Size() == 0 {
		return []byte{}, nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(t.Size())), nil
}

// Fields is the layout, over the bytes of one T (a struct type without
// pointers, see Bytes), of the named fields in the order given, with T's
// size as its extent (MPI_Type_create_struct with MPI_Type_create_resized
// to the struct's extent). A name may reach into a nested struct
// field by dots ("Pos.X"), and names a whole field otherwise; no names
// selects every field in declaration order (all of T but its padding).
// A name that is not a field of T, a type with pointers or a type that is
// not a struct gives a layout that carries the error (ErrArg, ErrType).
func Fields[T any](names ...string) Layout {
	const op = "Fields"
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return Layout{err: errorf(ErrType, op, "%s is not a struct type", t)}
	}
	if p := pointerIn(t, t.String()); p != "" {
		return Layout{err: errorf(ErrType, op, "%s holds %s: only pointer-free types travel as bytes", t, p)}
	}
	if len(names) == 0 {
		for i := range t.NumField() {
			names = append(names, t.Field(i).Name)
		}
	}
	var lens, displs []int
	for _, name := range names {
		off, size, err := fieldAt(t, name)
		if err != nil {
			return Layout{err: errorf(ErrArg, op, "%v", err)}
		}
		if size == 0 {
			continue
		}
		if n := len(lens); n > 0 && displs[n-1]+lens[n-1] == off {
			lens[n-1] += size // adjacent fields: one run
			continue
		}
		lens, displs = append(lens, size), append(displs, off)
	}
	return Indexed(lens, displs).Resized(0, int(t.Size()))
}

// fieldAt returns the byte offset and size of the field path name in t.
func fieldAt(t reflect.Type, name string) (off, size int, err error) {
	cur := t
	for part := range strings.SplitSeq(name, ".") {
		if cur.Kind() != reflect.Struct {
			return 0, 0, fmt.Errorf("%q: %s is not a struct", name, cur)
		}
		f, ok := cur.FieldByName(part)
		if !ok {
			return 0, 0, fmt.Errorf("%s has no field %q", cur, part)
		}
		if len(f.Index) != 1 {
			// A promoted field of an embedded struct: its offset is
			// the embedded field's plus its own.
			o := 0
			c := cur
			for _, i := range f.Index {
				sf := c.Field(i)
				o += int(sf.Offset)
				c = sf.Type
			}
			off += o
		} else {
			off += int(f.Offset)
		}
		cur = f.Type
	}
	return off, int(cur.Size()), nil
}

// pointerIn names the first kind of pointer t holds (at path), or "".
func pointerIn(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.Map, reflect.String,
		reflect.Interface, reflect.Chan, reflect.Func:
		return fmt.Sprintf("a %s (%s)", t.Kind(), path)
	case reflect.Array:
		return pointerIn(t.Elem(), path+"[]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p := pointerIn(f.Type, path+"."+f.Name); p != "" {
				return p
			}
		}
	}
	return ""
}
