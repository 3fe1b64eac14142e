package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// gorunBin is the gorun binary built once for all tests.
var gorunBin string

// rankCases are the programs ranks run, selected by GORUN_TEST_CASE. Each
// runs between mpi.Init and mpi.Finalize; an error fails the rank (exit 1).
var rankCases = map[string]func(w *mpi.Comm) error{}

// rawCases run without the harness calling Init/Finalize (for tests of
// those, of Abort and of exits).
var rawCases = map[string]func() int{}

func TestMain(m *testing.M) {
	if name := os.Getenv("GORUN_TEST_CASE"); name != "" {
		os.Exit(runRank(name))
	}
	dir, err := os.MkdirTemp("", "gorun-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gorunBin = filepath.Join(dir, "gorun")
	if pre := os.Getenv("GORUN_TEST_GORUN"); pre != "" {
		// A prebuilt gorun, for hosts without Go (the lent GPU hosts run
		// this package compiled with go test -c).
		gorunBin = pre
	} else if out, err := exec.Command("go", "build", "-o", gorunBin, "../cmd/gorun").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build gorun: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runRank is the rank side: a watchdog that dumps every goroutine before
// the test's deadline, then the case.
func runRank(name string) int {
	deadline := 100 * time.Second
	if d, err := time.ParseDuration(os.Getenv("GORUN_TEST_DEADLINE")); err == nil {
		deadline = d
	}
	time.AfterFunc(deadline, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		fmt.Fprintf(os.Stderr, "rank %s: test deadline %v passed; goroutines:\n%s\n", os.Getenv("GORUN_RANK"), deadline, buf[:n])
		// The other ranks' watchdogs fire at about the same time: give
		// them the time to dump too before gorun, seeing this rank
		// exit, ends them.
		time.Sleep(3 * time.Second)
		os.Exit(3)
	})
	if dir := os.Getenv("GORUN_TEST_DIR"); dir != "" {
		// Leave traces for the leftover checks: our pid and the job id.
		os.WriteFile(filepath.Join(dir, "pid."+os.Getenv("GORUN_RANK")), []byte(strconv.Itoa(os.Getpid())), 0o644)
		os.WriteFile(filepath.Join(dir, "jobid"), []byte(os.Getenv("GORUN_JOBID")), 0o644)
	}
	if f, ok := rawCases[name]; ok {
		return f()
	}
	f, ok := rankCases[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no test case %q\n", name)
		return 2
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "Init: %v\n", err)
		return 1
	}
	w := mpi.World()
	if err := f(w); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: FAIL: %v\n", w.Rank(), err)
		return 1
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", w.Rank(), err)
		return 1
	}
	return 0
}

// result is what a gorun run produced.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
	dir            string // GORUN_TEST_DIR of the run
}

// job describes one gorun invocation for a test.
type job struct {
	np      int      // -np; 0: none given
	cas     string   // rank case; empty to run args as the program
	args    []string // program and its arguments when cas is empty
	flags   []string // extra gorun flags
	env     []string // extra environment for gorun (and so the ranks)
	stdin   string
	timeout time.Duration // gorun --timeout; default 120 s
}

func (j job) cmd(t *testing.T) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	to := j.timeout
	if to == 0 {
		to = 120 * time.Second
	}
	args := []string{"--timeout", strconv.Itoa(int(to / time.Second))}
	if j.np != 0 {
		args = append(args, "-np", strconv.Itoa(j.np))
	}
	args = append(args, j.flags...)
	if j.cas != "" {
		args = append(args, os.Args[0], "-test.run=^$")
	} else {
		args = append(args, j.args...)
	}
	c := exec.Command(gorunBin, args...)
	// Ranks dump their goroutines shortly before gorun's --timeout would
	// end them, unless the test means that timeout to fire.
	deadline := to - 5*time.Second
	if to <= 10*time.Second {
		deadline = to + time.Minute
	}
	c.Env = append(os.Environ(), "GORUN_TEST_DIR="+dir, "GORUN_TEST_DEADLINE="+deadline.String())
	if j.cas != "" {
		c.Env = append(c.Env, "GORUN_TEST_CASE="+j.cas)
	}
	c.Env = append(c.Env, j.env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	c.Stdin = strings.NewReader(j.stdin)
	return c, &out, &errb, dir
}

// run runs the job to its end.
func (j job) run(t *testing.T) result {
	t.Helper()
	c, out, errb, dir := j.cmd(t)
	start := time.Now()
	err := c.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start), dir: dir}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run gorun: %v", err)
		}
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	}
	return r
}

// ok runs the job and fails the test unless it exits 0.
func (j job) ok(t *testing.T) result {
	t.Helper()
	r := j.run(t)
	if r.code != 0 {
		t.Fatalf("gorun -np %d %s: exit %d\nstdout:\n%s\nstderr:\n%s", j.np, j.cas, r.code, r.stdout, r.stderr)
	}
	return r
}

// checkNothingLeft fails the test if any rank process of the run, its temp
// directory or a /dev/shm entry of its job is still there.
func checkNothingLeft(t *testing.T, r result) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(r.dir, "pid.*"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(string(b))
		if pid <= 0 {
			continue
		}
		// A zombie is not left running; anything else is.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
			t.Errorf("rank process %d (%s) still exists after gorun ended", pid, filepath.Base(f))
		}
	}
	id, err := os.ReadFile(filepath.Join(r.dir, "jobid"))
	if err != nil || len(id) == 0 {
		return
	}
	if m, _ := filepath.Glob("/dev/shm/gorun-" + string(id) + "-*"); len(m) > 0 {
		t.Errorf("shared memory left behind: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "gorun-"+string(id)+"-*")); len(m) > 0 {
		t.Errorf("temp files left behind: %v", m)
	}
}

// needRoot skips t unless it runs as root with tool (of util-linux) on
// the path, for what it does as root; under CI=true, which installs both,
// it fails instead.
func needRoot(t *testing.T, tool, what string) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root: " + what
	} else if _, err := exec.LookPath(tool); err != nil {
		why = "needs " + tool + " (util-linux)"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the test %s", why)
		}
		t.Skip(why)
	}
}
