package sm

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// wholeCount is a Handler that takes frames whole (short records) or
// through Begin and End, copies each payload into buf and counts it.
type wholeCount struct {
	buf []byte
	got atomic.Int64
}

func (w *wholeCount) Whole(src int, h *btl.Header, p []byte) bool {
	copy(w.buf, p)
	w.got.Add(1)
	return true
}
func (w *wholeCount) Begin(src int, h *btl.Header, n int) []byte { return w.buf[:n] }
func (w *wholeCount) End(src int, h *btl.Header, d []byte)       { w.got.Add(1) }
func (w *wholeCount) PeerFailed(src int, err error)              {}

// benchCPUs pins the calling goroutine's thread to the CPU of index i in
// GORUN_BENCH_CPUS ("A,B"), when set; a list of one CPU pins both threads
// to it, where the two take turns (what the rate is then is the
// scheduler's).
func benchCPUs(b *testing.B, i int) {
	s := os.Getenv("GORUN_BENCH_CPUS")
	if s == "" {
		return
	}
	f := strings.Split(s, ",")
	cpu, err := strconv.Atoi(f[min(i, len(f)-1)])
	if err != nil {
		b.Errorf("GORUN_BENCH_CPUS=%q: %v", s, err)
		return
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		b.Errorf("pin to CPU %d: %v", cpu, err)
	}
}

// BenchmarkRingRate is osu_mbw_mr's pattern on the bare ring, with none of
// the layers above it: rank 0 writes windows of 64 frames of 8 bytes (an
// EAGER header's 14 significant bytes, a short record each) by SendNow;
// rank 1 polls and, after each window, answers with one frame on the
// reverse ring, which rank 0 awaits before the next window. Both are
// goroutines of this process on threads of their own
// (GORUN_BENCH_CPUS=A,B pins them); the shared memory and its cache-line
// traffic are as between two processes. ns/msg is the time a message
// (Mmsg/s its inverse), against osu_mbw_mr's 1/rate: what the ring itself
// costs of the rate (docs/measurements.md, "The bare ring's message
// rate"). ns/op counts b.N messages; whole windows are sent.
func BenchmarkRingRate(b *testing.B) {
	_, m, _ := pair(b)
	var w [2]wholeCount
	for r := range m {
		w[r].buf = make([]byte, 64)
		m[r].env.Handler, m[r].whole = &w[r], &w[r]
	}
	out := reach(b, m[0], m[1]).(*outRing)
	back := reach(b, m[1], m[0]).(*outRing)
	var hdr btl.Header
	for i := range 14 {
		hdr[i] = byte(i + 1)
	}
	payload := make([]byte, 8)
	const window = 64
	windows := (b.N + window - 1) / window
	// stop: a side's ring failed (it cannot here but for a bug); the other
	// side stops waiting for what will not come.
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		benchCPUs(b, 1)
		for k := 1; k <= windows && !stop.Load(); k++ {
			for w[1].got.Load() < int64(k*window) && !stop.Load() {
				m[1].Progress()
			}
			for !back.SendNow(&hdr, payload[:4]) && !stop.Load() {
				if back.err != nil {
					b.Error(back.err)
					stop.Store(true)
				}
				m[1].Progress()
			}
		}
	}()
	benchCPUs(b, 0)
	b.ResetTimer()
	for k := 1; k <= windows && !stop.Load(); k++ {
		for range window {
			for !out.SendNow(&hdr, payload) && !stop.Load() {
				if out.err != nil {
					b.Error(out.err)
					stop.Store(true)
				}
				m[0].Progress()
			}
		}
		for w[0].got.Load() < int64(k) && !stop.Load() {
			m[0].Progress()
		}
	}
	b.StopTimer()
	<-done
	n := float64(windows * window)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/msg")
	b.ReportMetric(n/b.Elapsed().Seconds()/1e6, "Mmsg/s")
}
