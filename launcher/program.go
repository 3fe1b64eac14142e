package launcher

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// errExit carries an exit status with an error message.
type errExit struct {
	code int
	err  error
}

func (e *errExit) Error() string { return e.err.Error() }
func (e *errExit) Unwrap() error { return e.err }

// isGoPackage reports whether path is a directory holding Go source.
func isGoPackage(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(path, "*.go"))
	return len(m) > 0
}

// resolveProgram returns the absolute path of the executable to launch,
// building a Go package directory into tmp first.
func resolveProgram(prog, tmp string, msgs *output) (string, error) {
	if isGoPackage(prog) {
		return buildGo(prog, tmp, msgs)
	}
	if st, err := os.Stat(prog); err == nil && st.IsDir() {
		return "", &errExit{ExitNoExec, fmt.Errorf("%s is a directory without Go files", prog)}
	}
	path, err := exec.LookPath(prog)
	if errors.Is(err, exec.ErrDot) {
		// Found through a relative PATH entry ("." or an empty one): the
		// shell would run it too, and it is made absolute below.
		err = nil
	}
	if errors.Is(err, exec.ErrNotFound) && !strings.Contains(prog, "/") {
		// A bare name not on PATH: the current directory's, as mpirun
		// finds it (`gorun -np 4 hello` beside ./hello).
		if p, cerr := exec.LookPath("./" + prog); !errors.Is(cerr, os.ErrNotExist) {
			path, err = p, cerr // found, or there but not executable: that error
		}
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return "", &errExit{ExitNotFound, fmt.Errorf("program %q not found", prog)}
		}
		return "", &errExit{ExitNoExec, fmt.Errorf("program %q: %w", prog, err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &errExit{ExitInternal, err}
	}
	return abs, nil
}

// buildNote is how long a build runs before gorun says what it is doing:
// a warm build of a small package takes 0.2-0.5 s here and needs no
// words; a cold cache (first use, after a Go upgrade) compiles the runtime
// and every dependency, up to a minute, which looked like a hang.
const buildNote = time.Second

// buildGo builds the Go package dir into tmp, saying on msgs what it is
// doing when that takes longer than buildNote.
func buildGo(dir, tmp string, msgs *output) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &errExit{ExitInternal, err}
	}
	out := filepath.Join(tmp, filepath.Base(abs))
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = abs
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", &errExit{ExitInternal, fmt.Errorf("go build %s: %v", dir, err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	noted := false
	select {
	case err = <-done:
	case <-time.After(buildNote):
		noted = true
		msgs.println(fmt.Sprintf("gorun: building %s (go build in %s; a cold build cache compiles every dependency and can take a minute)...", dir, abs))
		err = <-done
	}
	if err != nil {
		return "", &errExit{ExitInternal, fmt.Errorf("go build %s: %v\n%s", dir, err, strings.TrimSpace(msg.String()))}
	}
	if noted {
		msgs.println(fmt.Sprintf("gorun: built %s in %.1f s", dir, time.Since(start).Seconds()))
	}
	return out, nil
}

// mpiLibrary returns the MPI library (libmpi.so.N, Open MPI's or MPICH's)
// that the executable at path links, or "": such a program finds its
// place through its own launcher (PMIx, PMI), which gorun is not, and
// started by gorun each rank runs alone as rank 0 of 1. Scripts and static
// binaries are not recognized.
func mpiLibrary(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	for _, l := range libs {
		if strings.HasPrefix(l, "libmpi.so") || strings.HasPrefix(l, "libmpich.so") {
			return l
		}
	}
	return ""
}
