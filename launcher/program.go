package launcher

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
// a build that finds its executable up to date takes ~0.1 s and needs no
// words; a cold cache (first use, after a Go upgrade) compiles the runtime
// and every dependency, up to a minute, which looked like a hang.
const buildNote = time.Second

// buildGo builds the Go package dir and returns the executable's path in
// tmp (the job's: later runs of a rank, or its copies on other hosts,
// never meet a newer build), saying on msgs what it is doing when that
// takes longer than buildNote. It builds into gorun's own cache first
// (buildCache): go build leaves an executable that is up to date as it is
// (~0.1 s), where one built into a fresh directory is linked again every
// time (1-1.3 s for a small program on the 2-core VM, every run).
func buildGo(dir, tmp string, msgs *output) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &errExit{ExitInternal, err}
	}
	out := filepath.Join(tmp, filepath.Base(abs))
	target := out
	if c, unlock := buildCache(abs); c != "" {
		target = c
		defer unlock()
	}
	cmd := exec.Command("go", "build", "-o", target, ".")
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
	if target != out {
		if err := linkOrCopy(target, out); err != nil {
			return "", &errExit{ExitInternal, fmt.Errorf("go build %s: %v", dir, err)}
		}
	}
	if noted {
		msgs.println(fmt.Sprintf("gorun: built %s in %.1f s", dir, time.Since(start).Seconds()))
	}
	return out, nil
}

// buildCache returns where the executable of the package at abs is kept
// between runs (the user's cache directory, gorun/build/, a directory a
// package path) and a function that ends this run's hold on it: a lock,
// so that two gorun starting the same package at once do not write one
// file together. "" when there is no such place (no home, no lock): the
// build then goes straight into the job's directory.
func buildCache(abs string) (string, func()) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", nil
	}
	root := filepath.Join(base, "gorun", "build")
	sum := sha256.Sum256([]byte(abs))
	d := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", nil
	}
	lock, err := os.OpenFile(filepath.Join(d, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return "", nil
	}
	now := time.Now()
	os.Chtimes(lock.Name(), now, now) // in use: trimBuildCache keeps it
	trimBuildCache(root, now)
	return filepath.Join(d, filepath.Base(abs)), func() { lock.Close() }
}

// buildUnused is how long an executable in gorun's build cache stays
// without being run: then the next build removes it, as the go command
// trims its own cache of what it has not used for five days (a package
// built once from a temporary directory leaves megabytes otherwise).
const buildUnused = 5 * 24 * time.Hour

// trimBuildCache removes the entries of the build cache at root whose
// lock was last touched more than buildUnused before now.
func trimBuildCache(root string, now time.Time) {
	es, _ := os.ReadDir(root)
	for _, e := range es {
		st, err := os.Stat(filepath.Join(root, e.Name(), "lock"))
		if err == nil && now.Sub(st.ModTime()) > buildUnused {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// linkOrCopy puts the file src at dst (a new name): a hard link where both
// are on one file system, else a copy with src's mode.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
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
