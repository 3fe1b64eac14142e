package shmseg

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestStoreRelease: a reader that sees the flag StoreRelease wrote sees
// the data written before it, in a segment mapped twice (as two processes map it);
// the flag lands where it was meant to (the neighbouring words are left
// alone).
func TestStoreRelease(t *testing.T) {
	path := t.TempDir() + "/seg"
	mem, err := Create(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := Open(path, 4096) // the reader's own mapping, as another process has
	if err != nil {
		t.Fatal(err)
	}
	word := func(m []byte, i int) *uint64 { return (*uint64)(unsafe.Pointer(&m[8*i])) }
	w := func(i int) *uint64 { return word(mem, i) }
	r := func(i int) *uint64 { return word(peer, i) }
	const rounds = 200000
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			if !await(r(1), i) {
				done <- fmt.Errorf("round %d: the flag never came", i)
				return
			}
			if d := *r(8); d != 3*i {
				done <- fmt.Errorf("round %d: flag seen, data %d, want %d", i, d, 3*i)
				return
			}
			StoreRelease(r(2), i) // the answer
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		*w(8) = 3 * i
		StoreRelease(w(1), i)
		if !await(w(2), i) {
			t.Fatalf("round %d: no answer", i)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if *w(0) != 0 || *w(3) != 0 || *w(7) != 0 {
		t.Fatalf("StoreRelease wrote beside its word: %d %d %d", *w(0), *w(3), *w(7))
	}
}

// await spins until *p is v (true) or for 10 s.
func await(p *uint64, v uint64) bool {
	start := time.Now()
	for n := 0; atomic.LoadUint64(p) != v; n++ {
		if n&(1<<16-1) == 0 && time.Since(start) > 10*time.Second {
			return false
		}
	}
	return true
}
