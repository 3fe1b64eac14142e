package p2p

import (
	"fmt"
	"testing"
)

// rateWindow is OSU's window (osu_bw, osu_mbw_mr): 64 nonblocking sends,
// then a wait for all of them and a short ack.
const rateWindow = 64

// BenchmarkMessageRate is osu_mbw_mr's loop between two engines of one
// process over every registered two-rank transport: rank 0 starts a window
// of Isends, rank 1 a window of Irecvs, both WaitAll and release their
// requests, then rank 1 sends a 4-byte ack. One op is one message;
// allocs/op is per message, counted in both ranks.
func BenchmarkMessageRate(b *testing.B) {
	for _, s := range setups() {
		if s.btl == "self" || s.name == "sm-nocopy" {
			continue
		}
		for _, size := range []int{8, 64, 1024} {
			b.Run(fmt.Sprintf("btl=%s/size=%d", s.name, size), func(b *testing.B) {
				s.bare = true
				benchRate(b, openWorld(b, s), size)
			})
		}
	}
}

// benchRate runs b.N messages of size bytes from rank 0 to rank 1 in
// windows, each goroutine driving its own engine.
func benchRate(b *testing.B, w *world, size int) {
	windows := (b.N + rateWindow - 1) / rateWindow
	ack := make([]byte, 4)
	done := make(chan error, 1)
	recv := func() error {
		e := w.engs[1]
		buf := make([]byte, size)
		rs := make([]*Request, rateWindow)
		for range windows {
			for k := range rs {
				r, err := e.Irecv(1, 0, 100, buf)
				if err != nil {
					return err
				}
				rs[k] = r
			}
			e.WaitAll(rs)
			for k, r := range rs {
				if _, err := r.Result(); err != nil {
					return err
				}
				e.Release(r)
				rs[k] = nil
			}
			r, err := e.Isend(1, 0, 101, ack, false)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			e.Release(r)
		}
		return nil
	}
	go func() { done <- recv() }()
	e := w.engs[0]
	buf := make([]byte, size)
	rs := make([]*Request, rateWindow)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range windows {
		for k := range rs {
			r, err := e.Isend(1, 1, 100, buf, false)
			if err != nil {
				b.Fatal(err)
			}
			rs[k] = r
		}
		e.WaitAll(rs)
		for k, r := range rs {
			if _, err := r.Result(); err != nil {
				b.Fatal(err)
			}
			e.Release(r)
			rs[k] = nil
		}
		r, err := e.Irecv(1, 1, 101, ack)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Wait(); err != nil {
			b.Fatal(err)
		}
		e.Release(r)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWindowSelf is the engine's own cost per message, without a
// second goroutine to wait for: on btl/self one goroutine posts a window
// of Irecvs, then of Isends, and waits for all of them. One op is one
// message (a send and its receive).
func BenchmarkWindowSelf(b *testing.B) {
	for _, size := range []int{8, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			w := openWorld(b, setup{name: "self", btl: "self", bare: true})
			e := w.engs[0]
			sbuf, rbuf := make([]byte, size), make([]byte, size)
			rs := make([]*Request, 2*rateWindow)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i += rateWindow {
				if err := window(e, rs, sbuf, rbuf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// window posts len(rs)/2 receives and as many sends to itself, waits for
// all and releases them.
func window(e *Engine, rs []*Request, sbuf, rbuf []byte) error {
	n := len(rs) / 2
	for k := range n {
		r, err := e.Irecv(1, 0, 100, rbuf)
		if err != nil {
			return err
		}
		rs[k] = r
	}
	for k := range n {
		r, err := e.Isend(1, 0, 100, sbuf, false)
		if err != nil {
			return err
		}
		rs[n+k] = r
	}
	e.WaitAll(rs)
	for k, r := range rs {
		if _, err := r.Result(); err != nil {
			return err
		}
		e.Release(r)
		rs[k] = nil
	}
	return nil
}

// BenchmarkWindowSM is the software of osu_mbw_mr's window over btl/sm,
// both engines driven by one goroutine, so that the ring's lines stay in
// one core's cache: rank 1 posts a window of Irecvs, rank 0 writes a
// window of immediate sends (IsendNow), rank 1 waits for all and releases
// them. One op is one message, sent and received; what it costs is the
// engine's and the ring's instructions, none of the cache-line traffic
// between two cores (BenchmarkRingRate in btl/sm has that, without the
// engine). A send the ring does not take at once (a ring shaped too small
// for a window, an eager limit under 8 bytes) would need the receiver to
// poll while the sender waits, which one goroutine cannot do: it fails
// the benchmark.
func BenchmarkWindowSM(b *testing.B) {
	w := openWorld(b, setup{name: "sm", btl: "sm", bare: true})
	s, r := w.engs[0], w.engs[1]
	sbuf, rbuf := make([]byte, 8), make([]byte, 8)
	rs := make([]*Request, rateWindow)
	windows := (b.N + rateWindow - 1) / rateWindow
	b.ReportAllocs()
	b.ResetTimer()
	for range windows {
		for k := range rs {
			q, err := r.Irecv(1, 0, 100, rbuf)
			if err != nil {
				b.Fatal(err)
			}
			rs[k] = q
		}
		for range rs {
			q, err := s.IsendNow(1, 1, 100, sbuf)
			if err != nil {
				b.Fatal(err)
			}
			if q != nil {
				b.Fatal("the ring did not take a send of the window at once (a ring too small for 64 records, or an eager limit under 8 bytes)")
			}
		}
		r.WaitAll(rs)
		for _, q := range rs {
			if _, err := q.Result(); err != nil {
				b.Fatal(err)
			}
		}
		r.ReleaseAll(rs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(windows*rateWindow), "ns/msg")
}
