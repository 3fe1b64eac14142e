// Package osu holds what the OSU-method benchmark ports share: OSU's flags
// (-m MIN:MAX, -i, -x, -d cuda), the size sweep, the iteration defaults and the
// output format, which docs/measurements.md fixes so that the side-by-side driver can
// put these programs next to the C ones in tests/openmpi.
package osu

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/gorun/gorun/mpi"
)

// Options are a benchmark's parsed flags.
type Options struct {
	Min, Max    int
	Iters, Warm int // -i and -x; 0 means the per-size default
	LargeIters  int
	LargeWarm   int
	LargeSize   int
	Window      int
	// Device: -d cuda, buffers in GPU memory (Buffer).
	Device       bool
	itersFlagSet bool
}

// Parse reads OSU's flags. defMin/defMax are the default size range;
// iters/warm apply to sizes up to largeSize and largeIters/largeWarm above.
func Parse(name string, defMin, defMax, iters, warm, largeIters, largeWarm, largeSize int) *Options {
	o := &Options{Min: defMin, Max: defMax, Iters: iters, Warm: warm, LargeIters: largeIters, LargeWarm: largeWarm, LargeSize: largeSize, Window: 64}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	m := fs.String("m", "", "message sizes in bytes: MIN:MAX or MAX")
	i := fs.Int("i", 0, "timed iterations per size")
	x := fs.Int("x", -1, "warm-up iterations per size")
	w := fs.Int("W", 64, "window size (bw, bibw)")
	d := fs.String("d", "host", "where buffers live: host, or cuda (GPU memory)")
	fs.Parse(os.Args[1:])
	switch *d {
	case "host":
	case "cuda":
		o.Device = true
	default:
		fail(name, "-d %q: want host or cuda", *d)
	}
	if *m != "" {
		lo, hi, ok := strings.Cut(*m, ":")
		var err error
		if !ok {
			hi, lo = lo, ""
		}
		if lo != "" {
			if o.Min, err = strconv.Atoi(lo); err != nil {
				fail(name, "-m %q: %v", *m, err)
			}
		}
		if hi != "" {
			if o.Max, err = strconv.Atoi(hi); err != nil {
				fail(name, "-m %q: %v", *m, err)
			}
		}
		if o.Min < 0 || o.Max < o.Min {
			fail(name, "-m %q: need 0 <= MIN <= MAX", *m)
		}
	}
	if *i > 0 {
		o.Iters, o.LargeIters = *i, *i
	}
	if *x >= 0 {
		o.Warm, o.LargeWarm = *x, *x
	}
	if *w > 0 {
		o.Window = *w
	}
	return o
}

func fail(name, format string, args ...any) {
	fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
	os.Exit(2)
}

// Sizes is the sweep: Min (or 0), then powers of two up to Max.
func (o *Options) Sizes() []int {
	var s []int
	if o.Min == 0 {
		s = append(s, 0)
	}
	for n := 1; n <= o.Max; n *= 2 {
		if n >= o.Min {
			s = append(s, n)
		}
	}
	return s
}

// Counts returns timed and warm-up iterations for a size.
func (o *Options) Counts(size int) (iters, warm int) {
	if size > o.LargeSize {
		return o.LargeIters, o.LargeWarm
	}
	return o.Iters, o.Warm
}

// Header prints the comment lines.
func Header(title, column string) {
	fmt.Printf("# gorun OSU-method %s\n", title)
	fmt.Printf("# Size%*s\n", 24, column)
}

// Line prints one result line in OSU's layout.
func Line(size int, v float64) {
	fmt.Printf("%-10d%18.2f\n", size, v)
}

// RunCollective is the collective method of tests/openmpi/osu_common.h
// (osu_coll_run): for each size from the sweep (at least o.Min), a barrier,
// then iters+warm calls of op, each timed alone and followed by an untimed
// barrier; rank 0 prints the maximum over ranks of the per-rank average of
// the timed calls, in microseconds.
func RunCollective(w *mpi.Comm, o *Options, op func(size int) error) {
	for _, size := range o.Sizes() {
		if size < o.Min {
			continue
		}
		iters, warm := o.Counts(size)
		Must(mpi.Barrier(w))
		timer := 0.0
		for i := 0; i < iters+warm; i++ {
			t0 := mpi.Wtime()
			Must(op(size))
			t1 := mpi.Wtime()
			if i >= warm {
				timer += t1 - t0
			}
			Must(mpi.Barrier(w))
		}
		avg := []float64{timer * 1e6 / float64(iters)}
		maxv := []float64{0}
		Must(mpi.Reduce(w, avg, maxv, mpi.Max, 0))
		if w.Rank() == 0 {
			Line(size, maxv[0])
		}
	}
}

// Must ends the benchmark on an error.
func Must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
