package mpi

import (
	"testing"
	"time"
)

// TestWtime checks that Wtime counts seconds: it never goes back, and
// the time it reads across a sleep of 50 ms is at least that and at most
// what the time package reads around it (to Wtick's resolution).
func TestWtime(t *testing.T) {
	t1 := time.Now()
	a := Wtime()
	time.Sleep(50 * time.Millisecond)
	b := Wtime()
	outer := time.Since(t1).Seconds()
	if d := b - a; d < 0.050-Wtick() || d > outer+Wtick() {
		t.Fatalf("Wtime advanced %.9f s over a sleep of 0.05 s, within %.9f s", d, outer)
	}
	last := Wtime()
	for range 100000 {
		now := Wtime()
		if now < last {
			t.Fatalf("Wtime went back: %.9f after %.9f", now, last)
		}
		last = now
	}
}

// BenchmarkWtime is the cost of one clock read as OSU's loops make it.
func BenchmarkWtime(b *testing.B) {
	var s float64
	for range b.N {
		s += Wtime()
	}
	if s < 0 {
		b.Fatal(s)
	}
}
