package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	rawCases["lateinit"] = func() int {
		if os.Getenv("GORUN_RANK") == "1" {
			time.Sleep(time.Hour) // never reaches Init
		}
		mpi.Init()
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

// TestBootTimeout: a rank that does not call mpi.Init within
// --boot-timeout of the first that did ends the job (125), the message
// naming it with its pid and host, as every other line names a rank (it
// said "rank 1" alone).
func TestBootTimeout(t *testing.T) {
	r := job{np: 2, cas: "lateinit", flags: []string{"--boot-timeout", "1"}, timeout: 60 * time.Second}.run(t)
	if r.code != 125 || !regexp.MustCompile(`rank 1 \(pid \d+ on [^)]+\) did not call mpi.Init within 1s`).MatchString(r.stderr) {
		t.Fatalf("exit %d (want 125, naming rank 1's pid and host):\n%s", r.code, r.stderr)
	}
	checkNothingLeft(t, r)
}

// TestQuit: SIGQUIT (Ctrl-\) to gorun shows every rank's stacks, each
// line tagged with its rank, then ends the job with 131 and leaves
// nothing behind. gorun printed its own goroutines (Go's default) and
// exited 2.
func TestQuit(t *testing.T) {
	c, errb, dir := startReady(t, job{np: 2, cas: "sleep"})
	c.Process.Signal(syscall.SIGQUIT)
	err := c.Wait()
	code := c.ProcessState.ExitCode()
	out := errb.String()
	if code != 131 || !strings.Contains(out, "received SIGQUIT; asking every rank for its stacks") {
		t.Fatalf("exit %d (want 131): %v\n%.3000s", code, err, out)
	}
	for r := range 2 {
		if !strings.Contains(out, fmt.Sprintf("[1,%d]<stderr>:SIGQUIT: quit", r)) {
			t.Errorf("no tagged stack dump of rank %d:\n%.3000s", r, out)
		}
	}
	if strings.Contains(out, "launcher.(*job)") {
		t.Errorf("gorun's own stacks in the output:\n%.3000s", out)
	}
	checkNothingLeft(t, result{dir: dir})
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
		if _, err := fmt.Sscanf(l, "[1,%d]<stdout>:", &rank); err != nil {
			t.Fatalf("line without tag: %.60q", l)
		}
		body := l[strings.Index(l, ">:")+2:]
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
	// Each rank is told whether its host is oversubscribed: bound to one
	// CPU, it cannot tell from runtime.NumCPU (it once took every run of
	// two ranks for an oversubscribed one, and never spun in its waits).
	for _, np := range []int{1, runtime.NumCPU() + 1} {
		r := job{np: np, args: []string{"sh", "-c", `echo "over=$GORUN_OVERSUBSCRIBED"`}}.ok(t)
		want := fmt.Sprintf("over=%d\n", b2i[int](np > runtime.NumCPU()))
		if strings.Count(r.stdout, want) != np {
			t.Errorf("np=%d on %d CPUs: want %d lines %q in:\n%s", np, runtime.NumCPU(), np, want, r.stdout)
		}
	}
	// A rank bound to one CPU runs one P; the user's GOMAXPROCS wins.
	np := runtime.NumCPU()
	r = job{np: np, args: []string{"sh", "-c", `echo "procs=$GOMAXPROCS"`}}.ok(t)
	if strings.Count(r.stdout, "procs=1\n") != np {
		t.Errorf("np=%d on %d CPUs: want GOMAXPROCS=1 in every rank:\n%s", np, np, r.stdout)
	}
	r = job{np: 2, args: []string{"sh", "-c", `echo "procs=$GOMAXPROCS"`}, flags: []string{"-x", "GOMAXPROCS=3"}}.ok(t)
	if strings.Count(r.stdout, "procs=3\n") != 2 {
		t.Errorf("-x GOMAXPROCS=3: want it in every rank:\n%s", r.stdout)
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
	// A script whose #! interpreter is missing: the kernel's ENOENT read
	// as "no such file" for the script itself (exit 127); the message
	// names the interpreter, and the status is a shell's 126.
	bad := filepath.Join(dir, "badinterp")
	os.WriteFile(bad, []byte("#!/nonexistent/interp -x\necho hi\n"), 0o755)
	if r := (job{np: 2, args: []string{bad}}).run(t); r.code != 126 || !strings.Contains(r.stderr, `bad interpreter "/nonexistent/interp"`) {
		t.Errorf("script with a missing interpreter: exit %d, %s", r.code, r.stderr)
	}
	// A bare name that is not on PATH runs from the current directory, as
	// mpirun finds it.
	cwd := t.TempDir()
	os.WriteFile(filepath.Join(cwd, "gorun-cwd-prog"), []byte("#!/bin/sh\necho from-cwd\n"), 0o755)
	c := exec.Command(gorunBin, "-np", "2", "gorun-cwd-prog")
	c.Dir = cwd
	if out, err := c.CombinedOutput(); err != nil || strings.Count(string(out), "from-cwd") != 2 {
		t.Errorf("program in the current directory: %v\n%s", err, out)
	}
	// Found through "." on PATH, as a shell runs it (Go's exec.ErrDot).
	c = exec.Command(gorunBin, "-np", "1", "gorun-cwd-prog")
	c.Dir, c.Env = cwd, append(os.Environ(), "PATH=.:"+os.Getenv("PATH"))
	if out, err := c.CombinedOutput(); err != nil || strings.Count(string(out), "from-cwd") != 1 {
		t.Errorf("program found through . on PATH: %v\n%s", err, out)
	}
	// A script saved with CRLF line ends asks for "/bin/sh\r": shown.
	crlf := filepath.Join(dir, "crlf")
	os.WriteFile(crlf, []byte("#!/bin/sh\r\necho hi\r\n"), 0o755)
	if r := (job{np: 1, args: []string{crlf}}).run(t); r.code != 126 || !strings.Contains(r.stderr, `bad interpreter "/bin/sh\r"`) {
		t.Errorf("CRLF script: exit %d, %s", r.code, r.stderr)
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

// TestDefaultBinding (issue 12): by default each rank runs on CPUs of its
// own while the ranks fit the host's CPUs, one each at np = CPUs, a block
// of CPUs/np each below; with more ranks than CPUs, or --bind-to none,
// the kernel places them.
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
	if cpus >= 4 {
		r := job{np: 2, args: show}.ok(t)
		got := allowed(r)
		if len(got) != 2 {
			t.Errorf("np=2: %d distinct CPU sets, want a block each:\n%s", len(got), r.stdout)
		}
		for s := range got {
			if single(s) {
				t.Errorf("np=2 on %d CPUs: a rank bound to CPU %s alone, want a block of %d:\n%s", cpus, s, cpus/2, r.stdout)
			}
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

func init() {
	rankCases["mpmd"] = func(w *mpi.Comm) error {
		n := []int{1}
		if err := mpi.Allreduce(w, n, n, mpi.Sum); err != nil {
			return err
		}
		host, _ := os.Hostname()
		// The program's name, as the host has it (a copy's name ends in it).
		fmt.Printf("rank %d of %d (sum %d) runs %s on %s as %s\n", w.Rank(), w.Size(), n[0], os.Getenv("MPMD_NAME"), host, filepath.Base(os.Args[0]))
		return nil
	}
	rawCases["usrsignals"] = func() int {
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
		mpi.Init()
		markReady()
		for range 2 {
			fmt.Printf("rank %d got %v\n", mpi.World().Rank(), <-sigs)
		}
		mpi.Finalize()
		return 0
	}
}

// gorunOut runs gorun with args and returns its status, stdout and stderr
// apart.
func gorunOut(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	c := exec.Command(gorunBin, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestFlagErrors (issue 13): a bad flag is one line with a suggestion,
// help is printed once on stdout, Open MPI's flags that gorun has no use
// for are accepted with a note, --mca is read as gorun's own parameters.
func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-nP", "2", "true"}, "gorun: unknown flag -nP (did you mean -np?)"},
		{[]string{"--tag-ouput", "true"}, "gorun: unknown flag --tag-ouput (did you mean --tag-output?)"},
		{[]string{"--hostfil", "x", "true"}, "(did you mean --hostfile?)"},
		{[]string{"-np", "x", "true"}, `gorun: -np "x": want a whole number`},
		{[]string{"--timeout", "1.5", "true"}, `gorun: --timeout "1.5": want a whole number`},
		{[]string{"--report-bindings=maybe", "true"}, `gorun: --report-bindings="maybe": want true or false`},
		{[]string{"-np"}, "gorun: flag -np needs a value"},
		{[]string{"--mca", "pml", "ob1", "true"}, "gorun: --mca pml: not a gorun parameter"},
		{[]string{"--mca", "btl"}, "--mca needs two arguments"},
		{[]string{"-np", "1", "true", ":"}, "no program after ':'"},
		{[]string{"-np", "1", "true", ":", "--tag-output", "true"}, "only -np and -x may be given per program"},
		{[]string{"--get-stack-traces", "true"}, "give --timeout SECONDS too"},
		{nil, "no program given"},
	} {
		code, out, errs := gorunOut(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("gorun %q: exit %d (want 2), stdout %q, stderr %q (want one line with %q)", c.args, code, out, errs, c.want)
		}
	}
	for _, h := range []string{"--help", "-h", "-help"} {
		code, out, errs := gorunOut(t, h)
		if code != 0 || errs != "" || strings.Count(out, "usage: gorun") != 1 {
			t.Errorf("gorun %s: exit %d, stderr %q, usage %d times on stdout", h, code, errs, strings.Count(out, "usage: gorun"))
		}
	}
	code, out, errs := gorunOut(t, "--allow-run-as-root", "--oversubscribe", "-np", "2", "sh", "-c", "echo ran")
	if code != 0 || out != "ran\nran\n" || !strings.Contains(errs, "note: --allow-run-as-root accepted") || !strings.Contains(errs, "note: --oversubscribe accepted") {
		t.Errorf("Open MPI flags: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = gorunOut(t, "--mca", "btl", "vader,self", "--mca", "sm_slots", "8", "sh", "-c", "echo $GORUN_BTL $GORUN_SM_SLOTS")
	if code != 0 || out != "sm,self 8\n" || !strings.Contains(errs, "--mca btl vader,self read as GORUN_BTL=sm,self") {
		t.Errorf("--mca: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = gorunOut(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "gorun ") || !strings.Contains(out, "commit") || errs != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestMPMD (issue 13): the colon form runs several programs in one
// MPI_COMM_WORLD, each with its own -np and -x; it once ran one rank with
// ": -np 1 ./b" as its arguments.
func TestMPMD(t *testing.T) {
	self := os.Args[0]
	r := job{np: 1, args: []string{"-x", "GORUN_TEST_CASE=mpmd", "-x", "MPMD_NAME=first", self, "-test.run=^$",
		":", "-np", "2", "-x", "GORUN_TEST_CASE=mpmd", "-x", "MPMD_NAME=second", self, "-test.run=^$"}}.ok(t)
	for _, want := range []string{"rank 0 of 3 (sum 3) runs first on ", "rank 1 of 3 (sum 3) runs second on ", "rank 2 of 3 (sum 3) runs second on "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	r = job{np: 2, args: []string{"sh", "-c", "echo A$RANK", ":", "-n", "1", "sh", "-c", "echo B$RANK $0", "arg"}, flags: []string{"--display-map"}}.ok(t)
	if !strings.Contains(r.stdout, "A0\n") || !strings.Contains(r.stdout, "A1\n") || !strings.Contains(r.stdout, "B2 arg\n") || !strings.Contains(r.stderr, "ranks 0=sh 1=sh 2=sh") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// TestDisplayMap (issue 13): a hostfile's localhost:2 is 2 slots, as with
// -H (it was read as ssh port 2), and --display-map says so.
func TestDisplayMap(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("localhost:2\n"), 0o644)
	r := job{np: 2, flags: []string{"--hostfile", hf, "--display-map"}, args: []string{"true"}}.ok(t)
	if !strings.Contains(r.stderr, `localhost: 2 slots, here, no ssh; from hosts:1 "localhost:2" (2 slots); ranks 0 1`) {
		t.Errorf("--display-map:\n%s", r.stderr)
	}
}

// TestMaxSlots: a hostfile's max_slots bounds a host's ranks also when
// its slots come from its CPUs (no slots=): "localhost max_slots=1" ran
// two ranks, where mpirun refuses.
func TestMaxSlots(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("localhost max_slots=1\n"), 0o644)
	r := job{np: 2, flags: []string{"--hostfile", hf}, args: []string{"true"}}.run(t)
	if r.code != 2 || !strings.Contains(r.stderr, "exceed the max_slots of every host (localhost:1)") {
		t.Errorf("-np 2 on localhost max_slots=1: exit %d: %s", r.code, r.stderr)
	}
	job{np: 1, flags: []string{"--hostfile", hf}, args: []string{"true"}}.ok(t)
}

// TestClosedCtlFd: a wrapper that closes the descriptors it inherits
// before starting the program (Python's subprocess does by default) takes
// the rank's control socket away; Init says so and how to pass it on
// (it said "socket operation on non-socket" alone).
func TestClosedCtlFd(t *testing.T) {
	r := job{np: 1, args: []string{"sh", "-c", `exec 3>&- "$0" -test.run=^$`, os.Args[0]}, env: []string{"GORUN_TEST_CASE=probe-procnull"}}.run(t)
	if r.code == 0 || !strings.Contains(r.stderr, "control socket fd 3") || !strings.Contains(r.stderr, "a wrapper that starts the program must pass it on") {
		t.Errorf("fd 3 closed by a wrapper: exit %d: %s", r.code, r.stderr)
	}
}

// TestStuckStdout: SIGINT ends gorun even when nothing reads its stdout
// (a pipe whose reader stopped): the ranks' exit reports wait behind
// their output in the agent's stream, and gorun waited for them forever
// (a second SIGTERM did nothing; only SIGKILL ended it).
func TestStuckStdout(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close() // open, never read
	c, _, errb, _ := job{np: 2, args: []string{"sh", "-c", `yes "a line from rank $OMPI_COMM_WORLD_RANK"`}}.cmd(t)
	c.Stdout = pw
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	time.Sleep(time.Second) // the pipe is full by then
	c.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		if code := c.ProcessState.ExitCode(); code != 130 {
			t.Errorf("exit %d after SIGINT, want 130: %s", code, errb.String())
		}
	case <-time.After(hangGuard):
		c.Process.Kill()
		<-done
		t.Fatalf("gorun still ran %v after SIGINT with its stdout stuck: %s", hangGuard, errb.String())
	}
}

func init() {
	rankCases["barrier-loop"] = func(w *mpi.Comm) error {
		// Allreduces for 4 s by rank 0's clock (every rank runs as many).
		start := time.Now()
		for {
			stop := []int{0}
			if w.Rank() == 0 && time.Since(start) > 4*time.Second {
				stop[0] = 1
			}
			if err := mpi.Allreduce(w, stop, stop, mpi.Max); err != nil {
				return err
			}
			if stop[0] == 1 {
				return nil
			}
		}
	}
}

// TestCtrlZ: SIGTSTP (Ctrl-Z) stops the ranks, which run in process
// groups of their own that the terminal's signal does not reach, and then
// gorun; SIGCONT (fg, bg) continues them, and the job ends normally, also
// after a stop longer than the failure detector's suspicion (2.4 s). The
// ranks ran on, at full speed, while gorun was stopped.
func TestCtrlZ(t *testing.T) {
	for _, j := range []job{
		{np: 2, args: []string{"sh", "-c", `sleep 2; echo "done $OMPI_COMM_WORLD_RANK"`}},
		{np: 2, cas: "barrier-loop"},
	} {
		c, out, errb, _ := j.cmd(t)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		var ranks []int
		for range 100 { // the ranks started
			if ranks = childrenOf(c.Process.Pid); len(ranks) == 2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		c.Process.Signal(syscall.SIGTSTP)
		for _, pid := range append([]int{c.Process.Pid}, ranks...) {
			st := procState(pid)
			for end := time.Now().Add(hangGuard); st != "T" && time.Now().Before(end); st = procState(pid) {
				time.Sleep(20 * time.Millisecond)
			}
			if st != "T" {
				t.Errorf("%v: process %d (gorun %d, ranks %v) is %q %v after SIGTSTP, want stopped (T)", j.args, pid, c.Process.Pid, ranks, st, hangGuard)
			}
		}
		time.Sleep(3 * time.Second)
		c.Process.Signal(syscall.SIGCONT)
		select {
		case err := <-done:
			if err != nil || (j.cas == "" && strings.Count(out.String(), "done ") != 2) {
				t.Errorf("%v %s: %v after SIGTSTP and SIGCONT: stdout %q, stderr %s", j.args, j.cas, err, out.String(), errb.String())
			}
		case <-time.After(hangGuard):
			c.Process.Kill()
			<-done
			t.Fatalf("%v %s: no end after SIGCONT: %s", j.args, j.cas, errb.String())
		}
	}
}

// childrenOf lists the processes whose parent is pid, but for gorun's
// reaper.
func childrenOf(pid int) []int {
	var kids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		k, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
		if ppid, _ := procStat(k); ppid == pid && !bytes.Contains(cmd, []byte("gorun-reaper")) {
			kids = append(kids, k)
		}
	}
	return kids
}

// procState is pid's state letter (R, S, T, ...) from /proc.
func procState(pid int) string {
	_, st := procStat(pid)
	return st
}

// procStat reads pid's parent and state from /proc/pid/stat.
func procStat(pid int) (int, string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid, f[0]
}

// TestForwardSignals (issue 13): SIGUSR1 and SIGUSR2 to gorun reach every
// rank, as with mpirun; the job goes on.
func TestForwardSignals(t *testing.T) {
	c, errb, _ := startReady(t, job{np: 2, cas: "usrsignals"})
	c.Process.Signal(syscall.SIGUSR1)
	c.Process.Signal(syscall.SIGUSR2)
	err := c.Wait()
	out := c.Stdout.(*bytes.Buffer).String()
	if err != nil {
		t.Fatalf("gorun: %v\n%s\n%s", err, out, errb)
	}
	for r := range 2 {
		for _, s := range []string{"user defined signal 1", "user defined signal 2"} {
			if want := fmt.Sprintf("rank %d got %s\n", r, s); !strings.Contains(out, want) {
				t.Errorf("missing %q in:\n%s", want, out)
			}
		}
	}
}

// TestStackTraces (issue 13): with --get-stack-traces, a job that runs
// past --timeout first shows every rank's goroutine stacks.
func TestStackTraces(t *testing.T) {
	r := job{np: 2, cas: "sleep", timeout: 3 * time.Second, flags: []string{"--get-stack-traces"}}.run(t)
	if r.code != 124 || !strings.Contains(r.stderr, "asking every rank for its stacks") {
		t.Fatalf("exit %d (want 124):\n%s", r.code, r.stderr)
	}
	for rank := range 2 {
		if n := strings.Count(r.stderr, fmt.Sprintf("[1,%d]<stderr>:SIGQUIT: quit", rank)); n != 1 {
			t.Errorf("%d stack dumps tagged with rank %d, want one:\n%s", n, rank, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "time.Sleep") {
		t.Errorf("no goroutine of the sleeping ranks in the dump:\n%s", r.stderr)
	}
	checkNothingLeft(t, r)
}

func init() {
	rawCases["prompt"] = func() int {
		mpi.Init()
		if mpi.World().Rank() == 0 {
			os.Stdout.WriteString("name? ")
			b := make([]byte, 100)
			n, _ := os.Stdin.Read(b)
			fmt.Printf("hello %s", b[:n])
		}
		mpi.Finalize()
		return 0
	}
}

// TestPartialLine (issue 13): a prompt without a newline shows while its
// rank waits for the answer; it was held until a newline came.
func TestPartialLine(t *testing.T) {
	c, _, _, _ := job{np: 2, cas: "prompt"}.cmd(t)
	var errb bytes.Buffer
	c.Stdout, c.Stderr, c.Stdin = nil, &errb, nil
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Read until the prompt shows; hangGuard catches a gorun that holds it.
	got := make(chan string, 1)
	go func() {
		var seen []byte
		b := make([]byte, 100)
		for !bytes.Contains(seen, []byte("name? ")) {
			n, err := out.Read(b)
			seen = append(seen, b[:n]...)
			if err != nil {
				break
			}
		}
		got <- string(seen)
	}()
	select {
	case s := <-got:
		if s != "name? " {
			t.Errorf("before the answer, stdout %q", s)
		}
	case <-time.After(hangGuard):
		c.Process.Kill()
		c.Wait()
		t.Fatalf("the prompt never showed while rank 0 waited for stdin: %s", errb.String())
	}
	io.WriteString(in, "gorun\n")
	in.Close()
	rest, _ := io.ReadAll(out)
	if err := c.Wait(); err != nil || string(rest) != "hello gorun\n" {
		t.Errorf("%v: after the answer, stdout %q; stderr %s", err, rest, errb.String())
	}
}

// TestStdinTerminal: rank 0 reads gorun's stdin when it is a terminal,
// with gorun in the terminal's foreground (a session of its own on a
// pseudo-terminal here, as an interactive shell runs it). Rank 0 was given
// the terminal itself; in its own process group, the background of that
// terminal, its read stopped it (SIGTTIN) until gorun's failure detector
// ended the job ("rank 0 is stopped"), or for good with no Init.
func TestStdinTerminal(t *testing.T) {
	ptm, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptm.Close()
	for _, cas := range []string{"prompt", ""} {
		name := cas
		if cas == "" {
			name = "no-mpi"
		}
		t.Run(name, func(t *testing.T) {
			j := job{np: 2, cas: cas, timeout: 30 * time.Second}
			if cas == "" {
				j.args = []string{"sh", "-c", `if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then printf "name? "; read x; echo "hello $x"; fi`}
			}
			c, out, errb, _ := j.cmd(t)
			c.Stdin = pts
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			// Type the answer once gorun has the terminal: what is typed
			// before a reader comes waits in the terminal's queue.
			time.Sleep(200 * time.Millisecond)
			io.WriteString(ptm, "gorun\n")
			select {
			case err := <-done:
				if err != nil || !strings.Contains(out.String(), "hello gorun\n") {
					t.Errorf("%v: stdout %q; stderr %s", err, out.String(), errb.String())
				}
			case <-time.After(hangGuard):
				c.Process.Kill()
				<-done
				t.Fatalf("rank 0 never read the terminal: stdout %q; stderr %s", out.String(), errb.String())
			}
		})
	}
}

// openPTY opens a pseudo-terminal: its controlling side and the terminal.
func openPTY() (ptm, pts *os.File, err error) {
	ptm, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		return nil, nil, err
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		return nil, nil, err
	}
	return ptm, pts, nil
}

// TestOutputFilename (issue 13): --output-filename DIR writes each rank's
// streams to DIR/1/rank.N/{stdout,stderr}, as Open MPI 4.1, and still to
// gorun's own.
func TestOutputFilename(t *testing.T) {
	dir := t.TempDir()
	r := job{np: 2, args: []string{"sh", "-c", "echo out $RANK; printf 'err %s' $RANK >&2"}, flags: []string{"--output-filename", dir}}.ok(t)
	for rank := range 2 {
		for stream, want := range map[string]string{"stdout": fmt.Sprintf("out %d\n", rank), "stderr": fmt.Sprintf("err %d", rank)} {
			b, err := os.ReadFile(filepath.Join(dir, "1", fmt.Sprintf("rank.%d", rank), stream))
			if err != nil || string(b) != want {
				t.Errorf("rank %d %s: %q, %v; want %q", rank, stream, b, err, want)
			}
		}
		if !strings.Contains(r.stdout, fmt.Sprintf("out %d\n", rank)) {
			t.Errorf("stdout lacks rank %d's line: %q", rank, r.stdout)
		}
	}
}

func init() {
	rawCases["initerr"] = func() int {
		if err := mpi.Init(); err != nil {
			fmt.Println("Init:", err)
			return 1
		}
		fmt.Printf("rank %d of %d\n", mpi.World().Rank(), mpi.World().Size())
		mpi.Finalize()
		return 0
	}
}

// TestForeignLauncher (issue 13): a gorun program started by Open MPI's
// mpirun, and an Open MPI program started by gorun, say so instead of
// running as separate one-rank jobs.
func TestForeignLauncher(t *testing.T) {
	ref := openmpi(t)
	r := job{np: 2, args: []string{filepath.Join(ref, "hello")}}.run(t)
	if r.code != 125 || !strings.Contains(r.stderr, "links libmpi.so") || !strings.Contains(r.stderr, "mpirun -np 2") {
		t.Errorf("an Open MPI program under gorun: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	c := exec.Command("mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "GORUN_TEST_CASE=initerr", os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "PMIX_MCA_gds=hash")
	out, _ := c.CombinedOutput()
	if n := strings.Count(string(out), "started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=2) as one of 2 processes, not by gorun"); n != 2 {
		t.Errorf("a gorun program under mpirun: %d of 2 processes said so:\n%s", n, out)
	}
}

// TestRankfileAndTorchEnv (issue 13): --rankfile places and binds each
// rank where it says; every rank gets torchrun's MASTER_ADDR and
// MASTER_PORT (rank 0's host, a free port) unless the user set them;
// --verbose shows the launch's steps.
func TestRankfileAndTorchEnv(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to see the rankfile's binding")
	}
	rf := filepath.Join(t.TempDir(), "rf")
	os.WriteFile(rf, []byte("rank 0=localhost slot=1\nrank 1=localhost slot=0\n"), 0o644)
	show := []string{"sh", "-c", `echo "rank $RANK cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2) master $MASTER_ADDR:$MASTER_PORT"`}
	c := exec.Command(gorunBin, append([]string{"--rankfile", rf, "--verbose", "--display-map"}, show...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var port string
	for r, cpu := range []int{1, 0} {
		i := strings.Index(out.String(), fmt.Sprintf("rank %d cpus %d master 127.0.0.1:", r, cpu))
		if i < 0 {
			t.Fatalf("rank %d not on CPU %d with MASTER_ADDR 127.0.0.1:\n%s", r, cpu, out.String())
		}
		p := strings.Fields(out.String()[i:])[4]
		if port == "" {
			port = p
		}
		if p != port || strings.HasSuffix(p, ":") {
			t.Errorf("MASTER_PORT differs between ranks or is empty: %q", out.String())
		}
	}
	for _, want := range []string{"(--rankfile)", "from the rankfile (2 ranks); ranks 0 1", "gorun: trace", "all 2 ranks started"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	r := job{np: 2, args: []string{"sh", "-c", "echo $MASTER_ADDR:$MASTER_PORT"}, flags: []string{"-x", "MASTER_PORT=29500"}}.ok(t)
	if r.stdout != "127.0.0.1:29500\n127.0.0.1:29500\n" {
		t.Errorf("-x MASTER_PORT=29500: %q", r.stdout)
	}
}

// TestUsageStatus: what the hosts cannot meet, or gorun cannot start, is a
// usage error (status 2, one line), as the flags' errors are: these exited
// 125, as if gorun had failed to run a valid job, -np 1000000000 ran gorun
// out of memory, and -H "" (an unset variable in a script) was ignored.
func TestUsageStatus(t *testing.T) {
	for _, c := range []struct {
		j    job
		want string
	}{
		{job{np: 2, flags: []string{"--map-by", "ppr:2:node"}, args: []string{"true"}}, `--map-by "ppr:2:node": expected slot or node`},
		{job{np: 2, flags: []string{"--bind-to", "socket"}, args: []string{"true"}}, `--bind-to "socket": expected core or none`},
		{job{np: 1000000000, args: []string{"true"}}, "a job has at most 1048576 ranks"},
		{job{np: 5000, args: []string{"true"}}, "gorun starts at most 4032 ranks on one host"},
		{job{np: 1, flags: []string{"-H", ""}, args: []string{"true"}}, "given an empty value"},
		// A place the output cannot go is refused before any rank runs
		// (the job ran and exited 0 without the files it was asked for).
		{job{np: 1, flags: []string{"--output-filename", "/proc/gorun-nope"}, args: []string{"true"}}, "--output-filename /proc/gorun-nope: mkdir"},
		{job{np: 1, flags: []string{"--output-filename", "/dev/null"}, args: []string{"true"}}, "not a directory"},
		{job{np: 1, flags: []string{"--probe"}}, "give --topo --probe"},
	} {
		r := c.j.run(t)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") > 2 {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", c.j.flags, c.j.np, r.code, r.stderr, c.want)
		}
	}
}

// TestLocalAliases: this host under two names in -H is one host, as mpirun
// takes it: two ranks, local ranks 0 and 1 of 2 (two hosts had each
// numbered its own rank 0 of 1 and shared out the CPUs alone).
func TestLocalAliases(t *testing.T) {
	hn, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	r := job{np: 2, flags: []string{"-H", "localhost:1," + hn + ":1"}, args: []string{"sh", "-c", `echo "local $LOCAL_RANK/$LOCAL_WORLD_SIZE"`}}.ok(t)
	for _, want := range []string{"local 0/2\n", "local 1/2\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
}

// TestBuildCache: a Go package run by its directory is built into
// gorun's build cache and linked again only when it changed (it was
// linked into a fresh directory at every launch, 1-1.3 s on the 2-core
// VM each time, with the "cold build cache" note); an entry unused for
// longer than five days goes at the next build; two packages of one name
// in an MPMD job stay two programs; and where the cache cannot take the
// build (a full disk: a 1 MiB tmpfs, with root), the job still runs,
// built in its own directory.
func TestBuildCache(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cache, mod := t.TempDir(), t.TempDir()
	// The go command's own cache stays where it is (it defaults to
	// XDG_CACHE_HOME's too: a cold one compiles the standard library).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_CACHE_HOME=" + cache, "GOCACHE=" + strings.TrimSpace(string(gocache))}
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module cached\n\ngo 1.22\n"), 0o644)
	src := func(dir, v string) string {
		d := filepath.Join(mod, dir)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+v+"\") }\n"), 0o644)
		return d
	}
	stale := filepath.Join(cache, "gorun", "build", "0123456789abcdef")
	os.MkdirAll(stale, 0o755)
	os.WriteFile(filepath.Join(stale, "lock"), nil, 0o644)
	old := time.Now().Add(-6 * 24 * time.Hour)
	os.Chtimes(filepath.Join(stale, "lock"), old, old)
	dir := src("prog", "v1")
	exe := func() os.FileInfo {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(cache, "gorun", "build", "*", "bin", "prog"))
		if len(m) != 1 {
			t.Fatalf("build cache holds %v", m)
		}
		st, err := os.Stat(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if r := (job{np: 2, args: []string{dir}, env: env}).ok(t); r.stdout != "v1\nv1\n" {
		t.Fatalf("first run: %q", r.stdout)
	}
	first := exe()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an entry unused for six days is still there: %v", err)
	}
	if r := (job{np: 1, args: []string{dir}, env: env}).ok(t); r.stdout != "v1\n" {
		t.Fatalf("second run: %q", r.stdout)
	}
	// go build touches an executable it finds up to date and replaces
	// one it links (a new file): the same file is the one not linked.
	if !os.SameFile(first, exe()) {
		t.Errorf("an unchanged package was linked again")
	}
	src("prog", "v2")
	if r := (job{np: 1, args: []string{dir}, env: env}).ok(t); r.stdout != "v2\n" {
		t.Fatalf("after a change: %q", r.stdout)
	}
	a, b := src("a/worker", "worker a"), src("b/worker", "worker b")
	r := job{args: []string{"-np", "1", a, ":", "-np", "1", b}, env: env}.ok(t)
	if !strings.Contains(r.stdout, "worker a\n") || !strings.Contains(r.stdout, "worker b\n") {
		t.Errorf("two packages named worker: %q", r.stdout)
	}
	t.Run("full", func(t *testing.T) {
		needRoot(t, "unshare", "mounts a small tmpfs as the cache")
		full := t.TempDir()
		c, out, errb, _ := job{np: 1, args: []string{dir}, env: append(env, "XDG_CACHE_HOME="+full)}.cmd(t)
		c.Args = append([]string{"unshare", "-m", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$XDG_CACHE_HOME" && exec "$0" "$@"`}, c.Args...)
		c.Path, _ = exec.LookPath("unshare")
		if err := c.Run(); err != nil || out.String() != "v2\n" {
			t.Errorf("a cache without room: %v, %q\n%s", err, out, errb)
		}
	})
}

// TestDefaultNP: with hosts given and no -np, a rank runs on every slot,
// as mpirun fills them (one rank ran); a host whose slots are its CPUs,
// unknown until gorun reaches it, asks for -np instead of guessing; no
// hosts at all is one rank.
func TestDefaultNP(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("localhost slots=3\n"), 0o644)
	for _, c := range []struct {
		flags []string
		want  int
	}{
		{[]string{"-H", "localhost:2"}, 2},
		{[]string{"--hostfile", hf}, 3},
		{[]string{"-H", "localhost"}, runtime.NumCPU()},
		{nil, 1},
	} {
		if c.flags == nil && (os.Getenv("SLURM_JOB_NODELIST") != "" || os.Getenv("PBS_NODEFILE") != "") {
			continue // inside an allocation its tasks are the default
		}
		r := job{flags: c.flags, args: []string{"sh", "-c", "echo rank $RANK of $WORLD_SIZE"}}.ok(t)
		if n := strings.Count(r.stdout, fmt.Sprintf(" of %d\n", c.want)); n != c.want {
			t.Errorf("%v, no -np: want %d ranks of %d, got:\n%s", c.flags, c.want, c.want, r.stdout)
		}
	}
	r := job{flags: []string{"-H", "localhost:1,gorun-test-unknown-host"}, args: []string{"true"}}.run(t)
	if r.code != 2 || !strings.Contains(r.stderr, "gorun-test-unknown-host has no slots given") {
		t.Errorf("a host without slots, no -np: exit %d, %q", r.code, r.stderr)
	}
}

// TestMpiexecTimeout: MPIEXEC_TIMEOUT sets --timeout, as for mpirun (it
// was ignored: the job ran its full length); the flag wins over it; a
// value that is not whole seconds is a usage error. (gorun is run by
// hand: the harness always gives --timeout.)
func TestMpiexecTimeout(t *testing.T) {
	run := func(env string, args ...string) (int, string) {
		t.Helper()
		c := exec.Command(gorunBin, args...)
		c.Env = append(os.Environ(), env)
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	// Exit 124 is the timeout's (sleep 30 alone exits 0).
	if code, out := run("MPIEXEC_TIMEOUT=1", "-np", "1", "sleep", "30"); code != 124 {
		t.Errorf("MPIEXEC_TIMEOUT=1 sleep 30: exit %d, want 124: %s", code, out)
	}
	if code, out := run("MPIEXEC_TIMEOUT=1", "--timeout", "20", "-np", "1", "sleep", "2"); code != 0 {
		t.Errorf("--timeout 20 with MPIEXEC_TIMEOUT=1, sleep 2: exit %d: %s", code, out)
	}
	if code, out := run("MPIEXEC_TIMEOUT=soon", "-np", "1", "true"); code != 2 || !strings.Contains(out, `MPIEXEC_TIMEOUT="soon": want a whole number of seconds`) {
		t.Errorf("MPIEXEC_TIMEOUT=soon: exit %d: %s", code, out)
	}
}
