//go:build prof

package osu

// Built with -tags prof, every OSU port writes a CPU profile per rank:
// $OSU_PROF_DIR/cpu.RANK (default /tmp), covering the first
// $OSU_PROF_SECS seconds (default 4) of the run, Init included. Read it
// with `go tool pprof -top BINARY cpu.RANK`. bench/README.md shows the
// use; the profiles behind issue 12's notes were taken this way.

import (
	"cmp"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"
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
	time.AfterFunc(time.Duration(secs*float64(time.Second)), func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}
