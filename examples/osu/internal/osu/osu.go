// Package osu holds what the OSU-method benchmark ports share: OSU's flags
// (-m MIN:MAX, -i, -x, -d cuda, -f), the size sweep, the iteration defaults
// and the output format, which docs/measurements.md fixes so that the
// side-by-side driver can put these programs next to the C ones in
// tests/openmpi, and which follows OSU's own (title line "# OSU MPI ...
// Test v7.4", column layout, no size column for barrier, -f's columns) so
// that scripts written for OSU's output parse ours.
//
// One difference on purpose: the collectives' "Avg Latency(us)" figure is
// the maximum over ranks of each rank's average (the method the C
// references share, tests/openmpi/osu_common.h), where OSU reports the
// mean over ranks; with -f the columns are OSU's: mean, minimum and
// maximum over ranks.
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
	Device bool
	// Full: -f, the collectives print minimum, maximum and iterations
	// too, as OSU's -f.
	Full bool
}

// Version is the OSU micro-benchmarks release whose method and output
// these ports follow (docs/measurements.md's figures were measured with it).
const Version = "7.4"

// p2p are the point-to-point benchmarks, which take no -f (as OSU's).
var p2p = map[string]bool{"latency": true, "bw": true, "bibw": true, "mbw_mr": true, "put_latency": true, "get_latency": true, "acc_latency": true, "fop_latency": true}

// Parse reads OSU's flags. defMin/defMax are the default size range;
// iters/warm apply to sizes up to largeSize and largeIters/largeWarm above.
func Parse(name string, defMin, defMax, iters, warm, largeIters, largeWarm, largeSize int) *Options {
	o := &Options{Min: defMin, Max: defMax, Iters: iters, Warm: warm, LargeIters: largeIters, LargeWarm: largeWarm, LargeSize: largeSize, Window: 64}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	m := fs.String("m", "", "message sizes in bytes: MIN:MAX or MAX")
	i := fs.Int("i", 0, "timed iterations per size")
	x := fs.Int("x", -1, "warm-up iterations per size")
	w := fs.Int("W", 64, "window size (bw, bibw, mbw_mr)")
	d := fs.String("d", "host", "where buffers live: host, or cuda (GPU memory)")
	f := fs.Bool("f", false, "full statistics: minimum, maximum and iterations (collectives)")
	fs.Parse(os.Args[1:])
	if *f && p2p[name] {
		fail(name, "-f: full statistics apply to the collective benchmarks, as in OSU")
	}
	o.Full = *f
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

// Header prints the comment lines of a point-to-point benchmark, as OSU:
// "# OSU MPI Latency Test v7.4", then the columns.
func Header(title, column string) {
	fmt.Printf("# OSU MPI %s v%s\n", title, Version)
	fmt.Printf("%-10s%18s\n", "# Size", column)
}

// CollHeader prints a collective's comment lines, with -f's columns when
// asked; a benchmark without sizes (barrier) has no size column.
func CollHeader(o *Options, title string, sized bool) {
	fmt.Printf("# OSU MPI %s v%s\n", title, Version)
	if sized {
		fmt.Printf("%-10s%18s", "# Size", "Avg Latency(us)")
	} else {
		fmt.Print("# Avg Latency(us)")
	}
	if o.Full {
		fmt.Printf("%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations")
	}
	fmt.Println()
}

// Line prints one result line in OSU's layout.
func Line(size int, v float64) {
	fmt.Printf("%-10d%18.2f\n", size, v)
}

// CollStats reduces each rank's average time per call (µs) to rank 0 and
// prints its line there: size (unless sized is false), the maximum over
// ranks, and with -f the mean, minimum, maximum and iterations.
func CollStats(w *mpi.Comm, o *Options, size int, sized bool, avg float64, iters int) {
	in := []float64{avg}
	maxv, minv, sum := []float64{0}, []float64{0}, []float64{0}
	Must(mpi.Reduce(w, in, maxv, mpi.Max, 0))
	if o.Full {
		Must(mpi.Reduce(w, in, minv, mpi.Min, 0))
		Must(mpi.Reduce(w, in, sum, mpi.Sum, 0))
	}
	if w.Rank() != 0 {
		return
	}
	if sized {
		fmt.Printf("%-10d", size)
	}
	width := 18
	if !sized {
		width = 17 // OSU's column under "# Avg Latency(us)"
	}
	if !o.Full {
		fmt.Printf("%*.2f\n", width, maxv[0])
		return
	}
	fmt.Printf("%*.2f%18.2f%18.2f%12d\n", width, sum[0]/float64(w.Size()), minv[0], maxv[0], iters)
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
		CollStats(w, o, size, true, timer*1e6/float64(iters), iters)
	}
}

// Must ends the benchmark on an error.
func Must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// InitPair starts MPI for a point-to-point benchmark and returns the
// world, ending the program unless it has two ranks at least. The caller
// defers mpi.Finalize.
func InitPair(name string) *mpi.Comm {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	if w.Size() < 2 {
		log.Fatalf("%s: needs at least 2 ranks", name)
	}
	return w
}
