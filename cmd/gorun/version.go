package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionLine is gorun --version: the module version (a tag when built by
// `go install github.com/gorun/gorun/cmd/gorun@vX.Y.Z`, "(devel)" in a
// checkout) and the commit it was built from, as the Go toolchain
// recorded them.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "gorun (no build information) " + runtime.Version()
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	commit := "commit unknown: built without VCS stamping (-buildvcs=false, or outside a git checkout)"
	if rev != "" {
		commit = "commit " + rev
		if at != "" {
			commit += " of " + at
		}
		commit += dirty
	}
	return fmt.Sprintf("gorun %s (%s) %s %s/%s", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
