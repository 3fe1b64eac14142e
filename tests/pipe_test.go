package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

func init() {
	// chatter: every rank prints lines until it is stopped, as a program
	// piped into head does.
	rawCases["chatter"] = func() int {
		if err := mpi.Init(); err != nil {
			return 1
		}
		r := mpi.World().Rank()
		for i := 0; ; i++ {
			fmt.Printf("rank %d line %d\n", r, i)
			time.Sleep(time.Millisecond)
		}
	}
}

// TestStdoutClosed: `gorun -np 2 ./prog | head -1`. When the reader of
// gorun's output goes away, gorun does not die of SIGPIPE leaving ranks
// and shared memory behind: it stops the job, says why, exits 141
// (128+SIGPIPE, as a pipeline's writer would) and leaves nothing.
func TestStdoutClosed(t *testing.T) {
	c, _, errb, dir := job{np: 2, cas: "chatter"}.cmd(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = pw
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "rank ") {
		c.Process.Kill()
		t.Fatalf("first line %q: %v\n%s", line, err, errb)
	}
	pr.Close() // head -1 exits
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		c.Process.Kill()
		t.Fatalf("gorun did not end within %v of its output's reader going away\n%s", hangGuard, errb)
	}
	if code := c.ProcessState.ExitCode(); code != 141 {
		t.Fatalf("exit %d (state %v), want 141\n%s", code, c.ProcessState, errb)
	}
	if !strings.Contains(errb.String(), "broken pipe") {
		t.Errorf("stderr does not say why the job ended:\n%s", errb)
	}
	checkNothingLeft(t, result{dir: dir})
}

// TestGorunKilled (issue 15, item 4): SIGKILL of gorun itself, which can
// clean nothing, still leaves no rank, no /dev/shm segment and no
// temporary directory of the job behind: the ranks die with it, and the
// reaper it started removes the files.
func TestGorunKilled(t *testing.T) {
	c, _, dir := startReady(t, job{np: 3, cas: "sleep"})
	id, _ := os.ReadFile(filepath.Join(dir, "jobid"))
	if segs, _ := filepath.Glob("/dev/shm/gorun-" + string(id) + "-*"); len(segs) == 0 {
		c.Process.Kill()
		t.Fatalf("the ranks made no segment to leave behind (job %q)", id)
	}
	c.Process.Kill()
	c.Wait()
	// The reaper works once gorun is gone; poll for a clean slate.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		segs, _ := filepath.Glob("/dev/shm/gorun-" + string(id) + "-*")
		tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), "gorun-"+string(id)+"-*"))
		if len(segs)+len(tmps) == 0 || time.Now().After(end) {
			break
		}
	}
	checkNothingLeft(t, result{dir: dir})
}

// TestRankStopped (issue 15, item 3): a rank stopped with SIGSTOP, alive
// but never answering, ends the job within seconds, named, instead of
// hanging it until --timeout; nothing is left behind.
func TestRankStopped(t *testing.T) {
	c, errb, dir := startReady(t, job{np: 3, cas: "sleep", timeout: 100 * time.Second})
	b, err := os.ReadFile(filepath.Join(dir, "pid.1"))
	if err != nil {
		c.Process.Kill()
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	stopped := time.Now()
	syscall.Kill(pid, syscall.SIGSTOP)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		syscall.Kill(pid, syscall.SIGKILL)
		c.Process.Kill()
		t.Fatalf("the job did not end within %v of rank 1 being stopped\n%s", hangGuard, errb)
	}
	t.Logf("ended %v after the SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	if c.ProcessState.ExitCode() == 0 || !strings.Contains(errb.String(), "rank 1") || !strings.Contains(errb.String(), "stopped") {
		t.Errorf("exit %d; stderr should name rank 1 as stopped:\n%s", c.ProcessState.ExitCode(), errb)
	}
	checkNothingLeft(t, result{dir: dir})
}

// TestRankPaused (issue 15): a rank on this host stopped for pauseBound
// and then continued (a long GC pause) is not declared dead; a rank that
// stays stopped is (TestRankStopped).
func TestRankPaused(t *testing.T) {
	c, errb, dir := startReady(t, job{np: 3, cas: "mhpausable", timeout: 100 * time.Second})
	b, err := os.ReadFile(filepath.Join(dir, "pid.1"))
	var pid int
	fmt.Sscan(string(b), &pid)
	if err != nil || pid <= 0 {
		c.Process.Kill()
		t.Fatalf("rank 1's pid: %v %q", err, b)
	}
	survivePause(t, c, errb, dir, func() { syscall.Kill(pid, syscall.SIGSTOP) }, func() { syscall.Kill(pid, syscall.SIGCONT) })
	checkNothingLeft(t, result{dir: dir})
}
