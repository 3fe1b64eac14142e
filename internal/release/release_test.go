package release

import (
	"sync/atomic"
	"testing"
)

// TestStore64Publishes hands records from one goroutine to another through
// a word stored with Store64 and loaded with sync/atomic: every record the
// consumer sees published holds what the producer wrote before publishing
// it. It fails if the store could pass the record's writes (a store that
// the compiler moved, or a plain store on a weakly ordered machine).
func TestStore64Publishes(t *testing.T) {
	const n = 1 << 20
	var data [64]uint64
	var seq, ack uint64 // published by the producer; read by the consumer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= n; i++ {
			for i > 64 && atomic.LoadUint64(&ack) < i-64 {
			}
			data[i%64] = i * 3
			Store64(&seq, i)
		}
	}()
	for i := uint64(1); i <= n; i++ {
		for atomic.LoadUint64(&seq) < i {
		}
		if got := data[i%64]; got != i*3 {
			t.Fatalf("record %d published holding %d, want %d", i, got, i*3)
		}
		atomic.StoreUint64(&ack, i)
	}
	<-done
}
