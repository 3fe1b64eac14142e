package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
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

	"github.com/gorun/gorun/launcher/boot"
	"github.com/gorun/gorun/mpi"
)

func init() {
	// rank 1 fails in its own way while the others wait for a message that
	// never comes; gorun must stop them.
	rawCases["exit3"] = func() int { return failingRank(func() { os.Exit(3) }) }
	rawCases["sigkill"] = func() int {
		return failingRank(func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	rawCases["abort7"] = func() int { return failingRank(func() { mpi.Abort(mpi.World(), 7) }) }
	rawCases["sleep"] = func() int {
		mpi.Init()
		touchShm()
		markReady()
		time.Sleep(time.Hour)
		return 0
	}
	rawCases["noinit"] = func() int {
		if os.Getenv("GORUN_RANK") == "1" {
			return 0 // exits cleanly without ever calling Init
		}
		mpi.Init()
		return 0
	}
	rawCases["nofinalize"] = func() int {
		mpi.Init()
		if mpi.World().Rank() == 1 {
			return 0
		}
		time.Sleep(time.Hour)
		return 0
	}
	rawCases["singleton"] = func() int {
		if err := mpi.Init(); err != nil {
			fmt.Println("init:", err)
			return 1
		}
		w := mpi.World()
		b := []int{5}
		if err := mpi.Allreduce(w, b, b, mpi.Sum); err != nil {
			fmt.Println(err)
			return 1
		}
		r, _ := mpi.Irecv(w, make([]int, 1), 0, 0)
		mpi.Send(w, []int{9}, 0, 0)
		r.Wait()
		fmt.Printf("singleton rank %d of %d, allreduce %d\n", w.Rank(), w.Size(), b[0])
		mpi.Finalize()
		return 0
	}
	rawCases["secretleak"] = func() int {
		fd, _ := strconv.Atoi(os.Getenv("GORUN_CTL_FD"))
		f := os.NewFile(uintptr(fd), "ctl")
		m, err := boot.ReadCtl(f)
		if err != nil || len(m.Secret) < 16 {
			fmt.Println("no secret on the control socket:", err)
			return 1
		}
		cmdline, _ := os.ReadFile("/proc/self/cmdline")
		environ, _ := os.ReadFile("/proc/self/environ")
		for _, form := range []string{string(m.Secret), hex.EncodeToString(m.Secret), base64.StdEncoding.EncodeToString(m.Secret), base64.RawURLEncoding.EncodeToString(m.Secret)} {
			for _, where := range []string{string(cmdline), string(environ), strings.Join(os.Args, " ")} {
				if strings.Contains(where, form) {
					fmt.Println("the job secret is visible in argv or the environment")
					return 1
				}
			}
		}
		fmt.Println("secret checked")
		return 0
	}
	rawCases["stdin"] = func() int {
		mpi.Init()
		defer mpi.Finalize()
		if mpi.World().Rank() == 0 {
			b := make([]byte, 100)
			n, _ := os.Stdin.Read(b)
			fmt.Printf("rank 0 read %q\n", b[:n])
		}
		return 0
	}
	rawCases["lines"] = func() int {
		mpi.Init()
		defer mpi.Finalize()
		r := mpi.World().Rank()
		line := strings.Repeat(strconv.Itoa(r), 5000)
		for i := 0; i < 200; i++ {
			// Write each line in three pieces to tempt tearing.
			os.Stdout.WriteString(line[:1000])
			os.Stdout.WriteString(line[1000:])
			os.Stdout.WriteString("\n")
		}
		return 0
	}
}

// failingRank: every rank calls Init; rank 1 then calls die while the
// others block in a receive from rank 1.
func failingRank(die func()) int {
	if err := mpi.Init(); err != nil {
		return 1
	}
	touchShm()
	markReady()
	w := mpi.World()
	if w.Rank() == 1 {
		time.Sleep(200 * time.Millisecond)
		die()
	}
	mpi.Recv(w, make([]int, 1), 1, 0)
	time.Sleep(time.Hour)
	return 0
}

// touchShm creates a file under the job's /dev/shm prefix, as a transport
// would, so the tests can check that gorun removes it.
func touchShm() {
	os.WriteFile("/dev/shm/gorun-"+os.Getenv("GORUN_JOBID")+"-test-"+os.Getenv("GORUN_RANK"), []byte("x"), 0o600)
}

func markReady() {
	if dir := os.Getenv("GORUN_TEST_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "ready."+os.Getenv("GORUN_RANK")), nil, 0o644)
	}
}

// startReady starts j, whose ranks run a case that calls markReady, and
// returns once every rank is ready (failing the test after hangGuard).
func startReady(t *testing.T, j job) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	c, _, errb, dir := j.cmd(t)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(dir, "ready.*")); len(m) == j.np {
			return c, errb, dir
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatalf("ranks never got ready: %s", errb)
		}
	}
}

// hangGuard is far above the 1 s that gorun needs to stop a job: it
// catches hangs, it is not a performance assertion.
const hangGuard = 20 * time.Second

func TestLauncherEndings(t *testing.T) {
	cases := []struct {
		cas   string
		code  int
		msg   string
		flags []string
	}{
		{"exit3", 3, "rank 1 (pid ", nil},
		{"sigkill", 128 + 9, "was killed by signal 9 (SIGKILL)", nil},
		{"abort7", 7, "called mpi.Abort(7)", nil},
		{"sleep", 124, "exceeded --timeout", nil},
		{"noinit", 125, "rank 1 (pid", nil},
		{"nofinalize", 125, "without calling mpi.Finalize", nil},
	}
	for _, c := range cases {
		t.Run(c.cas, func(t *testing.T) {
			j := job{np: 3, cas: c.cas}
			if c.cas == "sleep" {
				j.timeout = 2 * time.Second
			}
			r := j.run(t)
			if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
				t.Fatalf("exit %d (want %d), stderr:\n%s", r.code, c.code, r.stderr)
			}
			if strings.Count(r.stderr, "gorun: ") > 2 { // the oversubscription warning and the verdict
				t.Errorf("more than one verdict line:\n%s", r.stderr)
			}
			if r.elapsed > hangGuard {
				t.Errorf("job took %v to end", r.elapsed)
			}
			checkNothingLeft(t, r)
		})
	}
}

// TestInterrupt: SIGINT (Ctrl-C) and SIGTERM to gorun end the job with
// 128+signal and leave nothing behind.
func TestInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c, errb, dir := startReady(t, job{np: 3, cas: "sleep"})
			c.Process.Signal(sig)
			err := c.Wait()
			code := c.ProcessState.ExitCode()
			if err == nil || code != 128+int(sig) {
				t.Fatalf("exit %d (want %d): %v\n%s", code, 128+int(sig), err, errb)
			}
			checkNothingLeft(t, result{dir: dir})
		})
	}
}

func TestSingleton(t *testing.T) {
	r := job{np: 1, args: []string{"env", "-u", "GORUN_RANK", "GORUN_TEST_CASE=singleton", os.Args[0], "-test.run=^$"}}.ok(t)
	if !strings.Contains(r.stdout, "singleton rank 0 of 1, allreduce 5") {
		t.Fatalf("stdout %q", r.stdout)
	}
	// And with no gorun at all.
	out, err := execOut(os.Args[0], []string{"GORUN_TEST_CASE=singleton"})
	if err != nil || !strings.Contains(out, "singleton rank 0 of 1") {
		t.Fatalf("%v: %s", err, out)
	}
}

func TestStdinToRank0(t *testing.T) {
	r := job{np: 2, cas: "stdin", stdin: "hello from stdin"}.ok(t)
	if !strings.Contains(r.stdout, `rank 0 read "hello from stdin"`) {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestNoTornLines(t *testing.T) {
	r := job{np: 4, cas: "lines", flags: []string{"--tag-output"}}.ok(t)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		var rank int
		if _, err := fmt.Sscanf(l, "[%d,stdout] ", &rank); err != nil {
			t.Fatalf("line without tag: %.60q", l)
		}
		body := l[strings.Index(l, "] ")+2:]
		if body != strings.Repeat(strconv.Itoa(rank), 5000) {
			t.Fatalf("torn or mixed line from rank %d: %.80q", rank, body)
		}
	}
}

func TestEnvironment(t *testing.T) {
	r := job{np: 3, args: []string{"sh", "-c", `echo "$OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GORUN_RANK $FOO"`}, flags: []string{"-x", "FOO=bar"}}.ok(t)
	for rank := 0; rank < 3; rank++ {
		want := fmt.Sprintf("%d 3 %d 3 %d 3 %d 3 %d bar", rank, rank, rank, rank, rank)
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
	// The job secret is never in argv or the environment: the rank reads
	// it from its control socket and looks for it, raw, in hex and in
	// base64, everywhere a process of the same user could read.
	r = job{np: 2, cas: "secretleak"}.run(t)
	if r.code != 0 || strings.Count(r.stdout, "secret checked") != 2 {
		t.Errorf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestProgramErrors(t *testing.T) {
	if r := (job{np: 2, args: []string{"/nonexistent/prog"}}).run(t); r.code != 127 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("missing program: exit %d, %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "notexec")
	os.WriteFile(f, []byte("x"), 0o644)
	if r := (job{np: 2, args: []string{f}}).run(t); r.code != 126 {
		t.Errorf("non-executable: exit %d, %s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() { syntax error }\n"), 0o644)
	if r := (job{np: 2, args: []string{dir}}).run(t); r.code != 125 || !strings.Contains(r.stderr, "go build") {
		t.Errorf("broken Go package: exit %d, %s", r.code, r.stderr)
	}
	if r := (job{np: 2, args: []string{"sh", "-c", "exit 0"}}).run(t); r.code != 0 {
		t.Errorf("non-MPI program: exit %d, %s", r.code, r.stderr)
	}
}

// TestTopo: gorun --topo answers on any machine: the matrix where there
// are GPUs, "no GPU" with the reason where there are none.
func TestTopo(t *testing.T) {
	out, err := execOut(gorunBin, nil, "--topo")
	if err != nil {
		t.Fatalf("gorun --topo: %v\n%s", err, out)
	}
	if !strings.Contains(out, "no GPU: ") && !strings.Contains(out, "GPU0") {
		t.Fatalf("gorun --topo printed neither GPUs nor the reason there are none:\n%s", out)
	}
}

// TestDefaultBinding (issue 12): by default each rank runs on a CPU of its
// own while the ranks fit the host's CPUs, as with Open MPI; with more
// ranks than CPUs, or --bind-to none, the kernel places them.
func TestDefaultBinding(t *testing.T) {
	cpus := runtime.NumCPU()
	show := []string{"sh", "-c", `echo "rank $GORUN_RANK cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"`}
	allowed := func(r result) map[string]bool {
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(l); len(f) == 4 && f[0] == "rank" {
				seen[f[3]] = true
			}
		}
		return seen
	}
	single := func(s string) bool { _, err := strconv.Atoi(s); return err == nil }
	r := job{np: cpus, args: show}.ok(t)
	got := allowed(r)
	if len(got) != cpus {
		t.Errorf("np=%d: %d distinct CPU sets, want one CPU each:\n%s", cpus, len(got), r.stdout)
	}
	for s := range got {
		if !single(s) {
			t.Errorf("np=%d: a rank may run on CPUs %q, want one:\n%s", cpus, s, r.stdout)
		}
	}
	for _, j := range []job{{np: cpus + 1, args: show}, {np: cpus, args: show, flags: []string{"--bind-to", "none"}}} {
		r := j.ok(t)
		for s := range allowed(r) {
			if cpus > 1 && single(s) {
				t.Errorf("np=%d %v: a rank bound to CPU %s, want unbound:\n%s", j.np, j.flags, s, r.stdout)
			}
		}
	}
}
