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
// never meet a newer build; a directory a package, so that two packages
// of one name in an MPMD job stay two programs), saying on msgs what it
// is doing when that takes longer than buildNote. It builds into gorun's
// own cache first (buildCache): go build leaves an executable that is up
// to date as it is (~0.1 s), where one built into a fresh directory is
// linked again every time (1-1.3 s for a small program on the 2-core VM,
// every run). Where the cache cannot take the build (a full disk, a
// quota), it builds into tmp as before.
func buildGo(dir, tmp string, msgs *output) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &errExit{ExitInternal, err}
	}
	sum := sha256.Sum256([]byte(abs))
	key := hex.EncodeToString(sum[:8])
	own := filepath.Join(tmp, "build", key)
	if err := os.MkdirAll(own, 0o755); err != nil {
		return "", &errExit{ExitInternal, err}
	}
	out := filepath.Join(own, filepath.Base(abs))
	start := time.Now()
	noted := false
	note := func() {
		if !noted && time.Since(start) >= buildNote {
			noted = true
			msgs.println(fmt.Sprintf("gorun: building %s (go build in %s; a cold build cache compiles every dependency and can take a minute)...", dir, abs))
		}
	}
	built := false
	if c, unlock := buildCache(key, filepath.Base(abs), func() {
		msgs.println(fmt.Sprintf("gorun: %s: waiting for another gorun's build of it...", dir))
	}); c != "" {
		err := goBuild(abs, c, note)
		if err == nil {
			err = linkOrCopy(c, out)
		}
		unlock()
		var ee *errExit
		if errors.As(err, &ee) {
			return "", ee // the compiler's own error: the same into tmp
		}
		built = err == nil
	}
	if !built {
		os.Remove(out)
		if err := goBuild(abs, out, note); err != nil {
			var ee *errExit
			if !errors.As(err, &ee) {
				ee = &errExit{ExitInternal, fmt.Errorf("go build %s: %v", dir, err)}
			}
			return "", ee
		}
	}
	if noted {
		msgs.println(fmt.Sprintf("gorun: built %s in %.1f s", dir, time.Since(start).Seconds()))
	}
	return out, nil
}

// goBuild runs go build of the package at abs into out, calling note
// every buildNote while it runs. A failure of the build itself (the
// compiler's, the go command's) comes as an *errExit with its output;
// anything else (the go command not starting) as a plain error.
func goBuild(abs, out string, note func()) error {
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = abs
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(buildNote)
	defer tick.Stop()
	note()
	for {
		select {
		case err := <-done:
			if err == nil {
				return nil
			}
			text := strings.TrimSpace(msg.String())
			if cacheTrouble(text) {
				return fmt.Errorf("go build: %v: %s", err, text)
			}
			return &errExit{ExitInternal, fmt.Errorf("go build %s: %v\n%s", abs, err, text)}
		case <-tick.C:
			note()
		}
	}
}

// cacheTrouble reports whether go build's output says it could not write
// its executable (a full disk or quota, a read-only place): then the
// build is tried again in the job's directory, not reported.
func cacheTrouble(out string) bool {
	for _, s := range []string{"no space left on device", "disk quota exceeded", "read-only file system", "permission denied"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// buildCache returns where the executable of the package keyed key
// (named name) is kept between runs (the user's cache directory,
// gorun/build/KEY/bin/NAME) and a function that ends this run's hold on
// it: a lock (KEY/lock), so that two gorun starting the same package at
// once do not write one file together; wait is called first when another
// holds it. "" when there is no such place (no home, no lock): the build
// then goes straight into the job's directory.
func buildCache(key, name string, wait func()) (string, func()) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", nil
	}
	root := filepath.Join(base, "gorun", "build")
	d := filepath.Join(root, key)
	for try := 0; try < 3; try++ {
		if err := os.MkdirAll(filepath.Join(d, "bin"), 0o755); err != nil {
			return "", nil
		}
		lock, err := os.OpenFile(filepath.Join(d, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return "", nil
		}
		fd := int(lock.Fd())
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			wait()
			if unix.Flock(fd, unix.LOCK_EX) != nil {
				lock.Close()
				return "", nil
			}
		}
		// trimBuildCache removes an entry under its lock: a lock file
		// taken after that is no longer the entry's, and locks nothing.
		var held, now unix.Stat_t
		if unix.Fstat(fd, &held) != nil || unix.Stat(lock.Name(), &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
			lock.Close()
			continue
		}
		t := time.Now()
		os.Chtimes(lock.Name(), t, t) // in use: trimBuildCache keeps it
		trimBuildCache(root, key, t)
		return filepath.Join(d, "bin", name), func() { lock.Close() }
	}
	return "", nil
}

// buildUnused is how long an executable in gorun's build cache stays
// without being run: then the next build removes it, as the go command
// trims its own cache of what it has not used for five days (a package
// built once from a temporary directory leaves megabytes otherwise).
const buildUnused = 5 * 24 * time.Hour

// trimBuildCache removes the entries of the build cache at root, other
// than key's, whose lock was last touched more than buildUnused before
// now; each under its lock, taken without waiting (an entry in use is
// left), its age looked at again once held.
func trimBuildCache(root, key string, now time.Time) {
	es, _ := os.ReadDir(root)
	for _, e := range es {
		if e.Name() == key {
			continue
		}
		lp := filepath.Join(root, e.Name(), "lock")
		if st, err := os.Stat(lp); err != nil || now.Sub(st.ModTime()) <= buildUnused {
			continue
		}
		lock, err := os.OpenFile(lp, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			if st, err := lock.Stat(); err == nil && now.Sub(st.ModTime()) > buildUnused {
				os.RemoveAll(filepath.Join(root, e.Name()))
			}
		}
		lock.Close()
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
