package btl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// encodeFixed is a region's encoding with every field set by hand, valid
// or not: kind, the key length byte, reserved bytes 2-7, address, length,
// then key.
func encodeFixed(kind, keyLen byte, reserved [6]byte, addr, n uint64, key []byte) []byte {
	b := make([]byte, regionFixed, regionFixed+len(key))
	b[0], b[1] = kind, keyLen
	copy(b[2:8], reserved[:])
	binary.LittleEndian.PutUint64(b[8:], addr)
	binary.LittleEndian.PutUint64(b[16:], n)
	return append(b, key...)
}

// TestRegionKeys: regions with keys of every length from 0 to MaxKeySize,
// of both memory kinds, encode to regionFixed plus the key's bytes and
// decode to the same kind, address, length and key, without the Handle,
// which stays home.
func TestRegionKeys(t *testing.T) {
	for _, kind := range []MemKind{MemHost, MemDevice} {
		for n := 0; n <= MaxKeySize; n++ {
			key := make([]byte, n)
			for i := range key {
				key[i] = byte(n*7 + i + 1)
			}
			r := Region{Kind: kind, Addr: 0x7f00_0000_1000 + uint64(n), Len: 1<<40 + uint64(n), Handle: "local"}
			if err := r.SetKey(key); err != nil {
				t.Fatalf("SetKey(%d bytes): %v", n, err)
			}
			b := make([]byte, MaxRegionSize)
			w := r.Encode(b)
			if w != regionFixed+n || r.EncodedLen() != w {
				t.Fatalf("key of %d: encoded %d bytes, EncodedLen %d, want %d", n, w, r.EncodedLen(), regionFixed+n)
			}
			want := encodeFixed(byte(kind), byte(n), [6]byte{}, r.Addr, r.Len, key)
			if !bytes.Equal(b[:w], want) {
				t.Fatalf("key of %d: encoding\n%x, want\n%x", n, b[:w], want)
			}
			var got Region
			if err := DecodeRegion(b[:w], &got); err != nil {
				t.Fatalf("key of %d: %v", n, err)
			}
			if got.Kind != kind || got.Addr != r.Addr || got.Len != r.Len || !bytes.Equal(got.Key(), key) || got.Handle != nil {
				t.Fatalf("key of %d: decoded %+v (key %x), want %+v (key %x), no handle", n, got, got.Key(), r, key)
			}
		}
	}
	var r Region
	if err := r.SetKey(make([]byte, MaxKeySize+1)); err == nil {
		t.Error("SetKey accepted a key of MaxKeySize+1 bytes")
	}
	if len(r.Key()) != 0 {
		t.Errorf("a refused key left %d bytes", len(r.Key()))
	}
}

// TestDecodeRegionRejects: everything a corrupt or malicious peer could
// get wrong is refused with ErrBadRegion, and the limits just inside are
// accepted.
func TestDecodeRegionRejects(t *testing.T) {
	top := ^uint64(0)
	key3 := []byte{1, 2, 3}
	for _, c := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty", nil, false},
		{"short", make([]byte, regionFixed-1), false},
		{"fixed-only", make([]byte, regionFixed), true},
		{"kind-2", encodeFixed(2, 0, [6]byte{}, 0, 0, nil), false},
		{"kind-255", encodeFixed(255, 0, [6]byte{}, 0, 0, nil), false},
		{"key-65", encodeFixed(0, MaxKeySize+1, [6]byte{}, 0, 0, make([]byte, MaxKeySize+1)), false},
		{"key-255", encodeFixed(0, 255, [6]byte{}, 0, 0, make([]byte, 255)), false},
		{"key-64", encodeFixed(0, MaxKeySize, [6]byte{}, 0, 0, make([]byte, MaxKeySize)), true},
		{"key-shorter-than-said", encodeFixed(0, 3, [6]byte{}, 0, 0, key3[:2]), false},
		{"key-longer-than-said", encodeFixed(0, 3, [6]byte{}, 0, 0, append(key3, 4)), false},
		{"key-missing", encodeFixed(1, 3, [6]byte{}, 0, 0, nil), false},
		{"trailing", append(encodeFixed(0, 0, [6]byte{}, 0, 0, nil), 0), false},
		{"reserved-2", encodeFixed(0, 0, [6]byte{1}, 0, 0, nil), false},
		{"reserved-7", encodeFixed(0, 0, [6]byte{5: 0x80}, 0, 0, nil), false},
		{"wrap", encodeFixed(0, 0, [6]byte{}, top, 1, nil), false},
		{"wrap-far", encodeFixed(0, 0, [6]byte{}, 1<<63, 1<<63, nil), false},
		{"end-of-space", encodeFixed(0, 0, [6]byte{}, top-9, 9, nil), true},
		{"last-byte", encodeFixed(0, 0, [6]byte{}, top, 0, nil), true},
		{"device-key", encodeFixed(1, 3, [6]byte{}, 4096, 1<<30, key3), true},
	} {
		var r Region
		err := DecodeRegion(c.b, &r)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case !c.ok && !errors.Is(err, ErrBadRegion):
			t.Errorf("%s: %v (region %+v), want ErrBadRegion", c.name, err, r)
		}
	}
}

// FuzzRegion: DecodeRegion takes any bytes without panicking; what it
// accepts re-encodes to the very same bytes, and what it refuses is
// ErrBadRegion. The same bytes also make a region (kind, address, length
// and a key of their length modulo 65), which must survive the trip
// through Encode and DecodeRegion unless its address and length wrap.
func FuzzRegion(f *testing.F) {
	for n := 0; n <= MaxKeySize; n += 8 {
		r := Region{Kind: MemKind(n / 8 % 2), Addr: uint64(n) << 12, Len: uint64(n) * 1000}
		r.SetKey(bytes.Repeat([]byte{byte(n)}, n))
		b := make([]byte, r.EncodedLen())
		r.Encode(b)
		f.Add(b)
	}
	f.Add(encodeFixed(0, 0, [6]byte{}, ^uint64(0), 1, nil))
	f.Add(encodeFixed(3, 70, [6]byte{0, 1}, 1, 1, make([]byte, 70)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Region
		if err := DecodeRegion(b, &r); err != nil {
			if !errors.Is(err, ErrBadRegion) {
				t.Fatalf("DecodeRegion(%x): %v, not ErrBadRegion", b, err)
			}
		} else {
			out := make([]byte, MaxRegionSize)
			if n := r.Encode(out); !bytes.Equal(out[:n], b) {
				t.Fatalf("DecodeRegion(%x) re-encodes as %x", b, out[:n])
			}
		}

		if len(b) < regionFixed {
			return
		}
		in := Region{
			Kind: MemKind(b[0] % byte(numMemKinds)),
			Addr: binary.LittleEndian.Uint64(b[8:]),
			Len:  binary.LittleEndian.Uint64(b[16:]),
		}
		key := b[regionFixed:]
		key = key[:len(key)%(MaxKeySize+1)]
		if err := in.SetKey(key); err != nil {
			t.Fatalf("SetKey(%d bytes): %v", len(key), err)
		}
		enc := make([]byte, in.EncodedLen())
		in.Encode(enc)
		var got Region
		err := DecodeRegion(enc, &got)
		if in.Addr+in.Len < in.Addr {
			if !errors.Is(err, ErrBadRegion) {
				t.Fatalf("a region at %#x of %d bytes wraps, yet decodes: %v", in.Addr, in.Len, err)
			}
			return
		}
		if err != nil || got.Kind != in.Kind || got.Addr != in.Addr || got.Len != in.Len || !bytes.Equal(got.Key(), key) {
			t.Fatalf("round trip of %+v (key %x): %+v (key %x), %v", in, key, got, got.Key(), err)
		}
	})
}
