//go:build prof

package osu

// Built with -tags prof, every OSU port writes a CPU profile per rank:
// $OSU_PROF_DIR/cpu.RANK (default /tmp), covering the first
// $OSU_PROF_SECS seconds (default 4) of the run, Init included, or the
// run up to Finalize when it ends sooner. Read it with `go tool pprof
// -top BINARY cpu.RANK`. bench/README.md shows the use; the profiles
// behind issue 12's notes were taken this way. At 100 samples a second,
// a path of a few hundred ns needs 10-15 s of profile to rank its parts.

import (
	"cmp"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/gorun/gorun/mpi"
)

func init() {
	dir := cmp.Or(os.Getenv("OSU_PROF_DIR"), os.TempDir())
	secs, err := strconv.ParseFloat(os.Getenv("OSU_PROF_SECS"), 64)
	if err != nil || secs <= 0 {
		secs = 4
	}
	f, err := os.Create(filepath.Join(dir, "cpu."+cmp.Or(os.Getenv("GORUN_RANK"), "0")))
	if err != nil {
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	time.AfterFunc(time.Duration(secs*float64(time.Second)), stop)
	// A run shorter than that: stop at Finalize, through its hook (the
	// delete callback of an attribute on Self), once Init has run.
	go func() {
		for !mpi.Initialized() {
			time.Sleep(time.Millisecond)
		}
		k, err := mpi.CreateKeyval(nil, func(*mpi.Comm, mpi.Keyval, any) error { stop(); return nil })
		if err == nil {
			mpi.Self().SetAttr(k, nil)
		}
	}()
}
