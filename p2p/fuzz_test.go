package p2p

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"github.com/gorun/gorun/btl"
)

// Fuzz targets for every decoder of a peer's bytes in p2p: the frame
// header, and the engine's handler as a whole (which decodes headers and
// the regions of RMA RTS and CTS frames; btl/rma_test.go fuzzes the region
// decoder itself). CI runs each for a few seconds (.ci/run).

// headerSeeds are valid headers of every kind.
func headerSeeds() []header {
	return []header{
		{kind: kEager, ctx: 1, tag: 5, length: 3},
		{kind: kRTS, flags: fRMA, ctx: 1, tag: 9, length: 1 << 20, sreq: 7},
		{kind: kCTS, flags: fRMA, ctx: 1, length: 300, sreq: 1, rreq: 2},
		{kind: kCTS, flags: fNoPath, ctx: 2, sreq: 2, rreq: 3},
		{kind: kData, ctx: 1, tag: AnyTag, length: 10, rreq: 1},
		{kind: kFinS, ctx: 1, rreq: 1},
		{kind: kFinR, ctx: 1, sreq: 1},
		{kind: 0xff, flags: 0xff, ctx: ^uint32(0), tag: -1, length: ^uint64(0), sreq: ^uint64(0), rreq: ^uint64(0)},
	}
}

func encoded(h header) []byte {
	var b btl.Header
	h.encode(&b)
	return b[:]
}

// FuzzHeader: decode takes any 48 bytes without panicking, and encoding
// what it decoded gives the same bytes back, except the unused ones (2-3,
// 20-23 and 40-47), which encode leaves zero; decoding that again gives
// the same header.
func FuzzHeader(f *testing.F) {
	for _, h := range headerSeeds() {
		f.Add(encoded(h))
	}
	f.Add(bytes.Repeat([]byte{0xa5}, btl.HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in btl.Header
		copy(in[:], b)
		var h header
		h.decode(&in)
		var out btl.Header
		h.encode(&out)
		want := in
		want[2], want[3] = 0, 0
		clear(want[20:24])
		clear(want[40:48])
		if out != want {
			t.Fatalf("decode then encode of\n%x gave\n%x, want\n%x", in, out, want)
		}
		var h2 header
		h2.decode(&out)
		if h2 != h {
			t.Fatalf("decode(encode(%+v)) = %+v", h, h2)
		}
	})
}

// selfOnly opens btl/self alone.
var selfOnly = func() btl.Filter {
	f, err := btl.ParseFilter("self")
	if err != nil {
		panic(err)
	}
	return f
}()

// FuzzHandler feeds the engine's btl.Handler two arbitrary frames (header
// and payload each), as a transport would: Begin, the payload copied into
// the slice it returned, End, with the engine's lock held; the engine,
// one rank on the real btl/self, meanwhile has receives posted (host,
// wildcard, device) and two synchronous sends under way (RMA and frames),
// whose ids (1 and 2) the frames may name, and polls btl/self between and
// after the frames. Whatever the bytes, the engine must not panic, Begin
// must return a slice of the length asked (or nil, refusing the frame,
// with rank 0 failed), no byte may land outside a
// receive buffer, and after Close every request must be complete (none
// lost from the engine's tables, which would hang its Wait). Failing
// rank 0 (PeerFailed) is the expected outcome of garbage.
func FuzzHandler(f *testing.F) {
	region := func(addr, n uint64) []byte {
		r := btl.Region{Kind: btl.MemHost, Addr: addr, Len: n}
		b := make([]byte, r.EncodedLen())
		r.Encode(b)
		return b
	}
	for _, s := range []struct {
		h1, p1, h2, p2 []byte
	}{
		{encoded(header{kind: kEager, ctx: 1, tag: 5, length: 3}), []byte("abc"), encoded(header{kind: kEager, ctx: 1, tag: 6, length: 4}), []byte("defg")},
		{encoded(header{kind: kEager, ctx: 2, tag: 1, length: 5}), []byte("dev!!"), nil, nil},
		// Whole (even lengths): a truncated host receive, a device receive.
		{encoded(header{kind: kEager, ctx: 1, tag: 5, length: 18}), bytes.Repeat([]byte{3}, 18), encoded(header{kind: kEager, ctx: 2, tag: 1, length: 4}), []byte("dev!")},
		{encoded(header{kind: kRTS, ctx: 1, tag: 5, length: 40, sreq: 9}), nil, encoded(header{kind: kData, ctx: 1, length: 16, rreq: 3}), bytes.Repeat([]byte{7}, 16)},
		{encoded(header{kind: kRTS, flags: fRMA, ctx: 1, tag: 7, length: 100, sreq: 9}), region(0x10000, 100), encoded(header{kind: kFinS, rreq: 3}), nil},
		{encoded(header{kind: kCTS, flags: fRMA, ctx: 1, length: 300, sreq: 1, rreq: 5}), region(0x20000, 300), encoded(header{kind: kFinR, sreq: 1}), nil},
		// A refused part asked again (fResend), and a part landing as DATA.
		{encoded(header{kind: kCTS, flags: fRMA, ctx: 1, length: 300, sreq: 1, rreq: 5}), region(0x20000, 300), encoded(header{kind: kFinR, flags: fResend, sreq: 1}), nil},
		{encoded(header{kind: kRTS, flags: fRMA, ctx: 1, tag: 7, length: 100, sreq: 9}), region(0x10000, 100), encoded(header{kind: kData, length: 100, rreq: 3}), bytes.Repeat([]byte{5}, 100)},
		{encoded(header{kind: kCTS, ctx: 1, sreq: 2, rreq: 5}), nil, encoded(header{kind: kCTS, flags: fNoPath, ctx: 1, sreq: 1, rreq: 6}), nil},
		{encoded(header{kind: 42}), []byte{1}, encoded(header{kind: kRTS, flags: fRMA, ctx: 2, tag: 1, length: 64, sreq: 4}), region(0x30000, 64)},
	} {
		f.Add(s.h1, s.p1, s.h2, s.p2)
	}
	null := devNull(f)
	f.Fuzz(func(t *testing.T, h1, p1, h2, p2 []byte) {
		e := quietSelfEngine(t, null)
		const guard = 64
		hostA := make([]byte, 16+guard) // exact source and tag
		hostB := make([]byte, 300+guard)
		var reqs []*Request
		post := func(r *Request, err error) {
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
		post(e.Irecv(1, 0, 5, hostA[:16]))
		post(e.Irecv(1, AnySource, AnyTag, hostB[:300]))
		post(e.IrecvMem(2, 0, AnyTag, btl.DeviceMem(0, devPtr, 64)))
		post(e.Isend(1, 0, 9, pattern(1, 300), true)) // RMA, id 1
		post(e.Isend(1, 0, 9, nil, true))             // frames, id 2

		hd := Handler(e)
		feed := func(hb, p []byte) {
			var h btl.Header
			copy(h[:], hb)
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(p)%2 == 0 {
				// A frame in one piece (sm's short records) takes Whole,
				// which must do what Begin, the copy and End do.
				if !hd.(btl.WholeHandler).Whole(0, &h, p) && e.failed[0] == nil {
					t.Fatalf("Whole refused a %d-byte frame without failing the peer", len(p))
				}
				for range 4 {
					e.progress()
				}
				return
			}
			dst := hd.Begin(0, &h, len(p))
			if len(dst) != len(p) {
				if dst == nil && e.failed[0] != nil {
					return // refused: the transport drops the peer
				}
				t.Fatalf("Begin for %d bytes returned %d", len(p), len(dst))
			}
			copy(dst, p)
			hd.End(0, &h, dst)
			for range 4 {
				e.progress()
			}
		}
		feed(h1, p1)
		feed(h2, p2)
		e.Close()
		for i, r := range reqs {
			if !r.Done() {
				t.Errorf("request %d not complete after Close", i)
			}
		}
		for _, b := range [][]byte{hostA[16:], hostB[300:]} {
			if !bytes.Equal(b, make([]byte, guard)) {
				t.Errorf("bytes written past a receive buffer: %x", b)
			}
		}
	})
}

// FuzzBeginLength: Begin is called with the payload length that a frame's
// transport header claims, before any of the payload has arrived (tcp's
// and sm's lengths go up to 2^42). Whatever the header and the length,
// Begin must not allocate more than an eager frame's worth: it returns a
// slice of that length that is a posted receive's or eager-sized, or
// refuses the frame (nil) and fails the peer. Before the refusal, an
// eager frame or a DATA for an unknown receive claiming 2^41 bytes made
// it allocate them and the rank die of out of memory
// (testdata/fuzz/FuzzBeginLength).
func FuzzBeginLength(f *testing.F) {
	f.Add(encoded(header{kind: kEager, ctx: 1, tag: 5, length: 3}), uint64(3))
	f.Add(encoded(header{kind: kEager, ctx: 1, tag: 5, length: 1 << 16}), uint64(1<<16))
	f.Add(encoded(header{kind: kData, ctx: 1, length: 16, rreq: 3}), uint64(16))
	f.Add(encoded(header{kind: kRTS, flags: fRMA, ctx: 1, tag: 7, length: 100, sreq: 9}), uint64(btl.MaxRegionSize))
	f.Add(encoded(header{kind: 42}), uint64(1))
	null := devNull(f)
	f.Fuzz(func(t *testing.T, hb []byte, n uint64) {
		n %= 1<<42 + 1 // the transports' bound (tcp maxPayload, sm maxFrame)
		e := quietSelfEngine(t, null)
		if _, err := e.Irecv(1, AnySource, AnyTag, make([]byte, 300)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Isend(1, 0, 9, pattern(1, 300), true); err != nil {
			t.Fatal(err)
		}
		var h btl.Header
		copy(h[:], hb)
		hd := Handler(e)
		e.mu.Lock()
		defer e.mu.Unlock()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		dst := hd.Begin(0, &h, int(n))
		runtime.ReadMemStats(&m1)
		if a := m1.TotalAlloc - m0.TotalAlloc; a > uint64(e.maxEager)+64<<10 {
			t.Fatalf("Begin for a %d-byte frame allocated %d bytes", n, a)
		}
		if uint64(len(dst)) != n {
			if dst == nil && e.failed[0] != nil {
				return
			}
			t.Fatalf("Begin for %d bytes returned %d without failing the peer", n, len(dst))
		}
		for i := range dst {
			dst[i] = byte(i)
		}
		hd.End(0, &h, dst)
	})
}

// devNull opens /dev/null for the fuzz targets' stderr. Each bad frame is
// reported on stderr: quietSelfEngine keeps millions of them out of the
// fuzzer's output, but only while the engine runs (the fuzzer itself
// reports there).
func devNull(f *testing.F) *os.File {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { null.Close() })
	return null
}

// quietSelfEngine returns the engine of rank 0 in a world of one over
// btl/self, with os.Stderr sent to null until the test's end, when the
// engine is closed and then stderr given back.
func quietSelfEngine(t *testing.T, null *os.File) *Engine {
	stderr := os.Stderr
	os.Stderr = null
	t.Cleanup(func() { os.Stderr = stderr })
	e := Alloc(0, 1)
	mods, _, err := btl.OpenAll(btl.Env{Rank: 0, Size: 1, Handler: Handler(e)}, selfOnly)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Attach(mods, []btl.Peer{{Rank: 0}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
