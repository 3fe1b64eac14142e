package bufpool

import "testing"

func TestGetPut(t *testing.T) {
	p := New(12)
	for _, n := range []int{1, 2, 3, 1000, 1024, 1025, 2048} {
		b := p.Get(n)
		if len(b) != n || cap(b) != 1<<Class(n) {
			t.Fatalf("Get(%d): len %d cap %d, want len %d cap %d", n, len(b), cap(b), n, 1<<Class(n))
		}
		p.Put(b)
	}
	if b := p.Get(0); b == nil || len(b) != 0 {
		t.Fatalf("Get(0) = %v, want an empty non-nil slice", b)
	}
	if b := p.Get(5000); len(b) != 5000 {
		t.Fatalf("Get(5000) beyond the classes: len %d", len(b))
	}
	p.Put(make([]byte, 3)) // not a class's capacity: dropped, not handed out as 4
	if b := p.Get(3); cap(b) != 4 {
		t.Fatalf("Get(3) after Put of a 3-byte buffer: cap %d, want 4", cap(b))
	}
}

// A warm class hands out and takes back without allocating, by value and
// by reference.
func TestNoAllocsWarm(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops Puts under the race detector")
	}
	p := New(20)
	p.Put(p.Get(4096))
	p.PutRef(p.GetRef(100))
	if n := testing.AllocsPerRun(1000, func() { p.Put(p.Get(4000)) }); n > 0 {
		t.Errorf("Get/Put: %v allocations a round", n)
	}
	if n := testing.AllocsPerRun(1000, func() { p.PutRef(p.GetRef(100)) }); n > 0 {
		t.Errorf("GetRef/PutRef: %v allocations a round", n)
	}
}
