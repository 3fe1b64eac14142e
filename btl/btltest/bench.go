package btltest

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorun/gorun/btl"
)

// benchSizes are the payload lengths benchmarked: OSU's small and large
// ends and the fragment sizes in between.
var benchSizes = []int{8, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}

// Bench measures the transport alone, without p2p: two modules in this
// process, each polled flat out by a goroutine of its own.
//
//	pingpong/size=N: half the round trip of one frame (ns/op is one way)
//	stream/size=N:   one-way throughput with 64 frames in flight (MB/s)
//
// Sub-benchmark names follow docs/measurements.md ("Conventions"), e.g. BenchmarkSM/pingpong/size=8.
func Bench(b *testing.B, tr Transport) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pingpong/size=%s", sizeName(n)), func(b *testing.B) { benchPingPong(b, tr, n) })
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("stream/size=%s", sizeName(n)), func(b *testing.B) { benchStream(b, tr, n) })
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}

// counter is a Handler that only counts, into a buffer it reuses.
type counter struct {
	buf  []byte
	got  atomic.Int64
	fail atomic.Pointer[error]
}

func (c *counter) Begin(src int, h *btl.Header, n int) []byte {
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	return c.buf[:n]
}
func (c *counter) End(src int, h *btl.Header, d []byte) { c.got.Add(1) }
func (c *counter) PeerFailed(src int, err error)        { c.fail.Store(&err) }

type nopDone struct{ done atomic.Int64 }

func (d *nopDone) FrameDone(f *btl.Frame, err error) { d.done.Add(1) }

type benchNode struct {
	mod btl.Module
	ep  btl.Endpoint
	h   counter
	d   nopDone
}

func (tr Transport) benchPair(b *testing.B) [2]*benchNode {
	job := newJob()
	secret := make([]byte, 32)
	rand.Read(secret)
	var ns [2]*benchNode
	for r := range ns {
		ns[r] = &benchNode{}
		m, err := tr.open(tr.env(job, r, 2, secret, &ns[r].h))
		if err != nil {
			b.Fatal(err)
		}
		ns[r].mod = m
	}
	for r, n := range ns {
		o := ns[1-r]
		ep, err := n.mod.Reach(tr.peerOf(1-r, os.Getpid(), o.mod.Address()))
		if err != nil || ep == nil {
			b.Fatalf("reach: %v %v", ep, err)
		}
		n.ep = ep
	}
	b.Cleanup(func() {
		for _, n := range ns {
			n.mod.Close()
		}
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		for _, f := range left {
			os.Remove(f)
		}
	})
	return ns
}

func (n *benchNode) check(b *testing.B) {
	if e := n.h.fail.Load(); e != nil {
		b.Fatal(*e)
	}
}

func benchPingPong(b *testing.B, tr Transport, size int) {
	ns := tr.benchPair(b)
	payload := make([]byte, size)
	frames := [2]btl.Frame{{Payload: payload, Owner: &ns[0].d}, {Payload: payload, Owner: &ns[1].d}}
	iters := b.N + 100 // 100 warm-up round trips
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // rank 1 answers every frame
		defer wg.Done()
		n := ns[1]
		for i := int64(0); i < int64(iters); {
			n.mod.Progress()
			if n.h.got.Load() > i {
				i++
				n.ep.Send(&frames[1])
			}
			if n.h.fail.Load() != nil {
				return
			}
		}
		for n.d.done.Load() < int64(iters) {
			n.mod.Progress()
		}
	}()
	n := ns[0]
	for i := 0; i < iters; i++ {
		if i == 100 {
			b.ResetTimer()
		}
		n.ep.Send(&frames[0])
		for n.h.got.Load() <= int64(i) {
			n.mod.Progress()
			if n.h.fail.Load() != nil {
				break
			}
		}
	}
	b.StopTimer()
	wg.Wait()
	n.check(b)
	ns[1].check(b)
	// ns/op is one way: report the round trip halved, as OSU does.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/oneway")
	b.SetBytes(int64(2 * size))
}

func benchStream(b *testing.B, tr Transport, size int) {
	ns := tr.benchPair(b)
	const window = 64
	payload := make([]byte, size)
	frames := make([]btl.Frame, window)
	for i := range frames {
		frames[i] = btl.Frame{Payload: payload, Owner: &ns[0].d}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			ns[1].mod.Progress()
		}
	}()
	b.SetBytes(int64(size))
	n := ns[0]
	// Warm up: the connection is set up (tcp connects in Progress) and
	// one window goes through before the clock starts, as pingpong's
	// first 100 round trips do.
	for i := range frames {
		if err := n.ep.Send(&frames[i]); err != nil {
			b.Fatal(err)
		}
	}
	for n.d.done.Load() < window || ns[1].h.got.Load() < window {
		n.mod.Progress()
		n.check(b)
	}
	n.d.done.Store(0)
	ns[1].h.got.Store(0)
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		for sent < b.N && int64(sent)-n.d.done.Load() < window {
			if err := n.ep.Send(&frames[sent%window]); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		n.mod.Progress()
		n.check(b)
	}
	for ns[1].h.got.Load() < int64(b.N) {
		n.mod.Progress()
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
}
