package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
	"golang.org/x/sys/unix"
)

func init() {
	// mhblock: every rank calls Init, says it is ready, then waits for a
	// message from the next rank that never comes; a rank's death ends
	// the job (the survivors' Recv fails with ErrProcFailed and they exit 1).
	rawCases["mhblock"] = func() int {
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		markReady()
		w := mpi.World()
		if _, err := mpi.Recv(w, make([]int, 1), (w.Rank()+1)%w.Size(), 99); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", w.Rank(), err)
			return 1
		}
		return 0
	}
	// mhpausable: every rank calls Init, says it is ready, then runs
	// allreduces (a few hundred a second) until rank 0 finds the file
	// "done" in the test's directory; a pause anywhere stalls them all.
	rawCases["mhpausable"] = func() int {
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		markReady()
		w := mpi.World()
		done := filepath.Join(os.Getenv("GORUN_TEST_DIR"), "done")
		for {
			flag := []int{0}
			if _, err := os.Stat(done); err == nil && w.Rank() == 0 {
				flag[0] = 1
			}
			if err := mpi.Allreduce(w, flag, flag, mpi.Max); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", w.Rank(), err)
				return 1
			}
			if flag[0] == 1 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := mpi.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "Finalize:", err)
			return 1
		}
		return 0
	}
}

// start6 starts a job of 6 ranks, 2 on each of h1-h3, that runs the rank
// case cas, and returns once every rank has said it is ready.
func (nh *netHosts) start6(t *testing.T, cas string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	j := nh.job(6, "h1:2,h2:2,h3:2")
	j.cas = cas
	cmd, _, errb, dir := j.cmd(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cmd, dir, 6, errb)
	return cmd, errb, dir
}

// pauseBound is the pause a live rank or host must survive (issue 15:
// "a 2 s pause"): GORUN_MEMBER_SUSPICION (2.4 s) and GORUN_AGENT_TIMEOUT
// (2.5 s) are set above it.
const pauseBound = 2 * time.Second

// survivePause runs an mhpausable job (started by start), pauses part of
// it for pauseBound (pause, then resume), lets it run a while longer, and
// checks that it ends normally: a live but paused rank or host must not
// be declared dead.
func survivePause(t *testing.T, cmd *exec.Cmd, errb fmt.Stringer, dir string, pause, resume func()) {
	t.Helper()
	pause()
	time.Sleep(pauseBound)
	resume()
	time.Sleep(time.Second) // the detector's verdict would come now
	os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
	ended := make(chan struct{})
	go func() { cmd.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		<-ended
		t.Fatalf("the job did not end after the pause:\n%s", errb)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("a pause of %v ended the job (exit %d); stderr:\n%s", pauseBound, code, errb)
	}
}

// failBound is the bound on the time from a failure on a remote
// host (a killed rank or agent, a frozen or cut-off host) to gorun's exit.
const failBound = 3 * time.Second

// job is a gorun job across the test bed's hosts (through its ssh config).
func (nh *netHosts) job(np int, hosts string, flags ...string) job {
	f := append([]string{"--ssh-config", nh.config}, flags...)
	if hosts != "" {
		f = append(f, "-H", hosts)
	}
	return job{np: np, flags: f, timeout: 60 * time.Second}
}

// placementOf parses lines "rank host localrank localsize".
func placementOf(t *testing.T, out string) map[int][3]string {
	t.Helper()
	m := map[int][3]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("bad line %q in:\n%s", l, out)
		}
		r, _ := strconv.Atoi(f[0])
		m[r] = [3]string{f[1], f[2], f[3]}
	}
	return m
}

const whereAmI = `echo "$OMPI_COMM_WORLD_RANK $(hostname) $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE"`

// TestMultiHost runs jobs across network-namespace hosts with a real sshd
// each: placement, hostfiles, stdio and exit codes, MPI across hosts,
// binding, copying binaries, ssh host keys and timeouts, and every failure
// of a remote host with a bound on the time to end and a check that
// nothing is left running anywhere.
func TestMultiHost(t *testing.T) {
	nh := needNetHosts(t, 4, true)
	start := time.Now()
	defer func() { t.Logf("multi-host group took %v", time.Since(start).Round(time.Millisecond)) }()

	t.Run("placement", func(t *testing.T) {
		cases := []struct {
			name  string
			np    int
			hosts string
			flags []string
			want  []string // per rank: host local localsize
		}{
			{"slot", 6, "h1:2,h2:2,h3:2", nil, []string{"h1 0 2", "h1 1 2", "h2 0 2", "h2 1 2", "h3 0 2", "h3 1 2"}},
			{"node", 5, "h1:2,h2:2,h3:2", []string{"--map-by", "node"}, []string{"h1 0 2", "h2 0 2", "h3 0 1", "h1 1 2", "h2 1 2"}},
			{"localhost", 3, "localhost:1,h2:2", nil, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				j := nh.job(c.np, c.hosts, c.flags...)
				j.args = []string{"sh", "-c", whereAmI}
				r := j.ok(t)
				got := placementOf(t, r.stdout)
				if c.want == nil {
					// localhost runs here, without ssh: not a namespace host.
					if got[0][0] == "h2" || got[1][0] != "h2" || got[2][0] != "h2" {
						t.Errorf("placement %v", got)
					}
					return
				}
				for rank, w := range c.want {
					g := got[rank]
					if g := strings.Join(g[:], " "); g != w {
						t.Errorf("rank %d: %q, want %q", rank, g, w)
					}
				}
				checkNothingLeft(t, r)
			})
		}
		t.Run("default-slots-are-cores", func(t *testing.T) {
			j := nh.job(3, "h1,h2")
			j.args = []string{"sh", "-c", whereAmI}
			got := placementOf(t, j.ok(t).stdout)
			n := runtime.NumCPU() // the namespaces share this machine's CPUs
			for r := 0; r < 3; r++ {
				want := "h1"
				if r >= n {
					want = "h2"
				}
				if got[r][0] != want {
					t.Errorf("rank %d on %s, want %s (%d cores): %v", r, got[r][0], want, n, got)
				}
			}
		})
		t.Run("hostfile", func(t *testing.T) {
			hf := filepath.Join(t.TempDir(), "hosts")
			os.WriteFile(hf, []byte("# three hosts\nh1 slots=1\n\nh2 slots=2 max_slots=2   # full at 2\nh3 slots=1\n"), 0o644)
			j := nh.job(4, "", "--hostfile", hf)
			j.args = []string{"sh", "-c", whereAmI}
			got := placementOf(t, j.ok(t).stdout)
			for r, w := range []string{"h1", "h2", "h2", "h3"} {
				if got[r][0] != w {
					t.Errorf("rank %d on %s, want %s: %v", r, got[r][0], w, got)
				}
			}
			// Oversubscribed: one warning; h2 never beyond max_slots.
			j = nh.job(7, "", "--hostfile", hf)
			j.args = []string{"sh", "-c", whereAmI}
			r := j.ok(t)
			if !strings.Contains(r.stderr, "warning: 7 ranks on 4 slots") {
				t.Errorf("no oversubscription warning: %s", r.stderr)
			}
			got = placementOf(t, r.stdout)
			for rank, w := range []string{"h1", "h2", "h2", "h3", "h1", "h3", "h1"} {
				if got[rank][0] != w {
					t.Errorf("oversubscribed rank %d on %s, want %s: %v", rank, got[rank][0], w, got)
				}
			}
			// Refused.
			j = nh.job(5, "", "--hostfile", hf, "--nooversubscribe")
			j.args = []string{"true"}
			if r := j.run(t); r.code != 2 || !strings.Contains(r.stderr, "do not fit in the 4 slots") {
				t.Errorf("--nooversubscribe: exit %d: %s", r.code, r.stderr)
			}
		})
	})

	t.Run("stdio", func(t *testing.T) {
		j := nh.job(2, "h1:1,h2:1", "-x", "FOO=bar")
		j.args = []string{"sh", "-c", `cat; echo "out $OMPI_COMM_WORLD_RANK $(hostname) $FOO"; echo "err $OMPI_COMM_WORLD_RANK" >&2`}
		j.stdin = "hello from stdin\n"
		r := j.ok(t)
		for _, w := range []string{"hello from stdin\n", "out 0 h1 bar\n", "out 1 h2 bar\n"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
			}
		}
		if strings.Count(r.stdout, "hello from stdin") != 1 {
			t.Errorf("stdin not to rank 0 only:\n%s", r.stdout)
		}
		for _, w := range []string{"err 0\n", "err 1\n"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
			}
		}
		// Long lines from several hosts are never torn.
		j = nh.job(4, "h1:2,h2:2", "--tag-output")
		j.cas = "lines"
		r = j.ok(t)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if len(lines) != 800 {
			t.Fatalf("%d lines, want 800", len(lines))
		}
		for _, l := range lines {
			var rank int
			if _, err := fmt.Sscanf(l, "[1,%d]<stdout>:", &rank); err != nil {
				t.Fatalf("line without tag: %.60q", l)
			}
			if body := l[strings.Index(l, ">:")+2:]; body != strings.Repeat(strconv.Itoa(rank), 5000) {
				t.Fatalf("torn or mixed line from rank %d: %.80q", rank, body)
			}
		}
	})

	t.Run("exit-code", func(t *testing.T) {
		j := nh.job(4, "h1:2,h2:2")
		j.args = []string{"sh", "-c", `if [ "$OMPI_COMM_WORLD_RANK" = 3 ]; then exit 7; fi; exec sleep 60`}
		r := j.run(t)
		if r.code != 7 || !strings.Contains(r.stderr, "rank 3 (pid ") || !strings.Contains(r.stderr, " on h2) exited with status 7") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		if r.elapsed > hangGuard {
			t.Errorf("took %v", r.elapsed)
		}
		nh.checkNothingLeftOnHosts(t, 5*time.Second)
		// Every rank failing at once (before a held verdict was due):
		// still the failure's status, not 0 (issue 13 found it).
		j = nh.job(3, "h1:2,h2:1")
		j.args = []string{"sh", "-c", "exit 3"}
		if r := j.run(t); r.code != 3 || !strings.Contains(r.stderr, "exited with status 3") {
			t.Errorf("every rank exits 3: exit %d: %s", r.code, r.stderr)
		}
		// A program missing on the host (here: everywhere) is 127.
		j = nh.job(2, "h1:1,h2:1")
		j.args = []string{"/nonexistent/prog"}
		if r := j.run(t); r.code != 127 {
			t.Errorf("missing program: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("mpi", func(t *testing.T) {
		j := nh.job(6, "h1:2,h2:2,h3:2")
		j.cas = "ringsum"
		checkNothingLeft(t, j.ok(t))
		// Ranks interleaved over hosts, network chosen by CIDR, one rank here.
		j = nh.job(5, "h1:2,localhost:1,h3:2", "--map-by", "node", "--if-include", nsNet+".0/24")
		j.cas = "ringsum"
		checkNothingLeft(t, j.ok(t))
		nh.checkNothingLeftOnHosts(t, 5*time.Second)
	})

	t.Run("bind", func(t *testing.T) {
		j := nh.job(4, "h1:2,h2:2", "--bind-to", "core", "--report-bindings", "--tag-output")
		j.args = []string{"sh", "-c", `grep Cpus_allowed_list /proc/self/status`}
		r := j.ok(t)
		var cpus []int
		var set unix.CPUSet // what the hosts' agents may use: this machine's
		if err := unix.SchedGetaffinity(0, &set); err == nil {
			for c := 0; c < 1024; c++ {
				if set.IsSet(c) {
					cpus = append(cpus, c)
				}
			}
		}
		if len(cpus) == 0 {
			t.Skip("cannot read the CPU set")
		}
		for rank := 0; rank < 4; rank++ {
			cpu := cpus[(rank%2)%len(cpus)]
			host := []string{"h1", "h1", "h2", "h2"}[rank]
			if w := fmt.Sprintf("gorun: rank %d on %s bound to CPU %d [", rank, host, cpu); !strings.Contains(r.stderr, w) {
				t.Errorf("no %q in:\n%s", w, r.stderr)
			}
			if w := fmt.Sprintf("[1,%d]<stdout>:Cpus_allowed_list:\t%d\n", rank, cpu); !strings.Contains(r.stdout, w) {
				t.Errorf("no %q in:\n%s", w, r.stdout)
			}
		}
	})

	t.Run("copy-binaries", func(t *testing.T) {
		// h4's /tmp is private: neither gorun nor the test binary (both
		// under /tmp) exist there, so both are copied, checked by SHA-256.
		last := nh.n
		j := nh.job(3, fmt.Sprintf("h%d:2,h1:1", last))
		j.cas = "ringsum"
		j.ok(t)
		sshd := nh.sshd[last-1].Process.Pid
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(sshd), "-m", "sh", "-c", "ls /tmp/gorun-cache-0/").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "-gorun") || !strings.Contains(string(out), "-"+filepath.Base(os.Args[0])) {
			t.Errorf("cache on h%d: %v: %s", last, err, out)
		}
		// A second run finds the copies.
		j.ok(t)
		nh.checkNothingLeftOnHosts(t, 5*time.Second)
	})

	t.Run("mpmd", func(t *testing.T) {
		// Several programs across hosts (issue 13): each program's ranks
		// follow the previous one's over the slots, as Open MPI maps its
		// app contexts; each host gets the programs of its own ranks,
		// copied where missing (h4's /tmp is private: "second" is copied
		// there, and only it runs there).
		last := nh.n
		second := filepath.Join(t.TempDir(), "second")
		if err := runCmd("cp", os.Args[0], second); err != nil {
			t.Fatal(err)
		}
		self := filepath.Base(os.Args[0])
		j := nh.job(1, fmt.Sprintf("h1:2,h%d:2", last), "--display-map")
		j.args = []string{"-x", "GORUN_TEST_CASE=mpmd", "-x", "MPMD_NAME=first", os.Args[0], "-test.run=^$",
			":", "-np", "3", "-x", "GORUN_TEST_CASE=mpmd", "-x", "MPMD_NAME=second", second, "-test.run=^$"}
		r := j.ok(t)
		for rank, w := range []struct{ prefix, suffix string }{
			{"first on h1 as ", self},
			{"second on h1 as ", "second"},
			{fmt.Sprintf("second on h%d as ", last), "-second"}, // the copy in h4's cache
			{fmt.Sprintf("second on h%d as ", last), "-second"},
		} {
			want := fmt.Sprintf("rank %d of 4 (sum 4) runs %s", rank, w.prefix)
			i := strings.Index(r.stdout, want)
			if i < 0 {
				t.Errorf("no %q in:\n%s\n%s", want, r.stdout, r.stderr)
				continue
			}
			if line, _, _ := strings.Cut(r.stdout[i:], "\n"); !strings.HasSuffix(line, w.suffix) {
				t.Errorf("rank %d: %q, want it to end in %q", rank, line, w.suffix)
			}
		}
		for _, w := range []string{"ranks 0=" + self + " 1=second\n", "ranks 2=second 3=second\n"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("--display-map lacks %q:\n%s", w, r.stderr)
			}
		}
		checkNothingLeft(t, r)
		nh.checkNothingLeftOnHosts(t, 5*time.Second)
	})

	t.Run("proxyjump", func(t *testing.T) {
		j := nh.job(2, "h2j:2")
		j.args = []string{"sh", "-c", whereAmI}
		got := placementOf(t, j.ok(t).stdout)
		if got[0][0] != "h2" || got[1][0] != "h2" {
			t.Errorf("placement through the jump host: %v", got)
		}
	})

	t.Run("ssh-errors", func(t *testing.T) {
		dir := t.TempDir()
		cfg, _ := os.ReadFile(nh.config)
		writeCfg := func(name, known, extra string) string {
			c := strings.ReplaceAll(string(cfg), nh.known, known)
			p := filepath.Join(dir, name)
			os.WriteFile(p, []byte(extra+c), 0o600)
			return p
		}
		// h1's key has changed: refused, with the reason.
		other := filepath.Join(dir, "other_key")
		runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other)
		pub, _ := os.ReadFile(other + ".pub")
		f := strings.Fields(string(pub))
		known, _ := os.ReadFile(nh.known)
		var kb strings.Builder
		for _, l := range strings.Split(strings.TrimSpace(string(known)), "\n") {
			if strings.HasPrefix(l, nh.ip(1)+" ") {
				l = nh.ip(1) + " " + f[0] + " " + f[1]
			}
			kb.WriteString(l + "\n")
		}
		changed := filepath.Join(dir, "known_changed")
		os.WriteFile(changed, []byte(kb.String()), 0o600)
		empty := filepath.Join(dir, "known_empty")
		os.WriteFile(empty, nil, 0o600)
		cases := []struct {
			name, cfg, hosts, want string
			within                 time.Duration
		}{
			{"changed-key", writeCfg("changed", changed, ""), "h1:1,h2:1", "h1: host key refused: the host key of h1 (" + nh.ip(1) + ":22) has CHANGED", 10 * time.Second},
			{"unknown-key", writeCfg("unknown", empty, ""), "h2:1", "is not in known_hosts", 10 * time.Second},
			{"unreachable", writeCfg("unreach", nh.known, fmt.Sprintf("Host hx\n  HostName %s.99\n  ConnectTimeout 1\n", nsNet)), "hx:1,h1:1", "hx: connect to " + nsNet + ".99:22", 4 * time.Second},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				j := job{np: 2, flags: []string{"--ssh-config", c.cfg, "-H", c.hosts}, args: []string{"true"}, timeout: 60 * time.Second}
				r := j.run(t)
				if r.code != 125 || !strings.Contains(r.stderr, c.want) {
					t.Fatalf("exit %d, want 125 and %q in:\n%s", r.code, c.want, r.stderr)
				}
				if r.elapsed > c.within {
					t.Errorf("took %v, want at most %v", r.elapsed, c.within)
				}
				nh.checkNothingLeftOnHosts(t, 5*time.Second)
			})
		}
	})

	t.Run("failures", func(t *testing.T) {
		cases := []struct {
			name  string
			fault func(t *testing.T, dir string) // injects the failure
			heal  func()
			code  int
			want  []string // in gorun's one verdict line
		}{
			{"rank-killed", func(t *testing.T, dir string) {
				b, _ := os.ReadFile(filepath.Join(dir, "pid.4"))
				pid, _ := strconv.Atoi(string(b))
				if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
					t.Fatalf("cannot kill rank 4 (pid %q)", b)
				}
			}, nil, 128 + 9, []string{"rank 4 (pid ", " on h3) was killed by signal 9"}},
			{"agent-killed", func(t *testing.T, dir string) {
				pid := nh.findProc(2, "--agent")
				if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
					t.Fatal("no agent on h2")
				}
			}, nil, 125, []string{"lost host h2 with rank 2 (pid ", "rank 3 (pid ", "the agent was killed by signal KILL"}},
			// Found by memberlist ("rank 4 (pid P on h3) stopped responding")
			// or by the agent's silence ("lost host h3 with rank 4 ...").
			{"host-frozen", func(t *testing.T, dir string) { nh.freeze(3, false) }, func() { nh.freeze(3, true) },
				125, []string{"h3", "rank ", "frozen or cut off"}},
			{"host-cut-off", func(t *testing.T, dir string) {
				if err := nh.isolate(2, true); err != nil {
					t.Fatal(err)
				}
			}, func() { nh.isolate(2, false) }, 125, []string{"h2", "rank ", "frozen or cut off"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cmd, errb, dir := nh.start6(t, "mhblock")
				t0 := time.Now()
				c.fault(t, dir)
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(hangGuard):
					cmd.Process.Kill()
					<-done
				}
				took := time.Since(t0)
				if c.heal != nil {
					c.heal()
				}
				code := cmd.ProcessState.ExitCode()
				verdict := verdictLines(errb.String())
				t.Logf("ended %v after the fault, exit %d: %s", took.Round(time.Millisecond), code, strings.Join(verdict, " | "))
				if code != c.code {
					t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, errb)
				}
				if len(verdict) != 1 {
					t.Errorf("%d verdict lines, want 1:\n%s", len(verdict), errb)
				} else {
					for _, w := range c.want {
						if !strings.Contains(verdict[0], w) {
							t.Errorf("verdict %q lacks %q", verdict[0], w)
						}
					}
				}
				if took > failBound {
					t.Errorf("the job ended %v after the fault, want at most %v", took, failBound)
				}
				// A host that was cut off kills its ranks itself once the
				// launcher falls silent (GORUN_AGENT_TIMEOUT).
				nh.checkNothingLeftOnHosts(t, 6*time.Second)
			})
		}
	})

	// A host or a rank that stops for pauseBound (a long GC pause, a
	// stalled VM) and then goes on is not declared dead (issue 15).
	t.Run("pauses", func(t *testing.T) {
		cases := []struct {
			name string
			sig  func(dir string, cont bool)
		}{
			{"host-paused", func(_ string, cont bool) { nh.freeze(3, cont) }},
			{"rank-paused", func(dir string, cont bool) {
				b, _ := os.ReadFile(filepath.Join(dir, "pid.4"))
				pid, _ := strconv.Atoi(string(b))
				sig := syscall.SIGSTOP
				if cont {
					sig = syscall.SIGCONT
				}
				if pid <= 0 || syscall.Kill(pid, sig) != nil {
					t.Fatalf("cannot signal rank 4 (pid %q)", b)
				}
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cmd, errb, dir := nh.start6(t, "mhpausable")
				survivePause(t, cmd, errb, dir, func() { c.sig(dir, false) }, func() { c.sig(dir, true) })
				nh.checkNothingLeftOnHosts(t, 6*time.Second)
			})
		}
	})

	// Ctrl-C ends the job everywhere; a launcher killed outright (no
	// chance to clean up) leaves nothing either: its agents see the
	// connection end and kill their ranks.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run("launcher-"+unix.SignalName(sig), func(t *testing.T) {
			cmd, errb, _ := nh.start6(t, "mhblock")
			cmd.Process.Signal(sig)
			cmd.Wait()
			if sig == syscall.SIGINT {
				if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) || !strings.Contains(errb.String(), "received SIGINT") {
					t.Errorf("exit %d, stderr:\n%s", code, errb)
				}
			}
			nh.checkNothingLeftOnHosts(t, 6*time.Second)
		})
	}
}

// verdictLines are gorun's own lines, less warnings and traces.
func verdictLines(stderr string) []string {
	var v []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "gorun: ") && !strings.HasPrefix(l, "gorun: warning") && !strings.HasPrefix(l, "gorun: trace") {
			v = append(v, l)
		}
	}
	return v
}

// waitReady waits until n ranks have written ready files into dir.
func waitReady(t *testing.T, cmd *exec.Cmd, dir string, n int, errb fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		m, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
		if len(m) == n {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			sort.Strings(m)
			t.Fatalf("ranks never got ready (%v): %s", m, errb)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostfileErrors: a malformed hostfile or host list is refused with
// the file and line, before anything starts (no root needed).
func TestHostfileErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ body, want string }{
		{"h1 slots=2\nh2 slots=x\n", ":2: slots=\"x\": must be a positive number"},
		{"# ok\n\nh1 slots=2 color=red\n", ":3: unknown key \"color\""},
		{"h1 slots\n", ":1: \"slots\" is not key=value"},
		{"h1 slots=4 max_slots=2\n", ":1: slots=4 exceeds max_slots=2"},
		{"# nothing\n\n", "no hosts"},
	}
	for i, c := range cases {
		hf := filepath.Join(dir, fmt.Sprintf("hosts%d", i))
		os.WriteFile(hf, []byte(c.body), 0o644)
		r := job{np: 1, flags: []string{"--hostfile", hf}, args: []string{"true"}}.run(t)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, hf) {
			t.Errorf("hostfile %q: exit %d, want 2 and %q in: %s", c.body, r.code, c.want, r.stderr)
		}
	}
	if r := (job{np: 1, flags: []string{"-H", "h1:0"}, args: []string{"true"}}).run(t); r.code != 2 || !strings.Contains(r.stderr, "slots must be a positive number") {
		t.Errorf("-H h1:0: exit %d: %s", r.code, r.stderr)
	}
	// Only this host: no ssh at all, slots respected.
	r := job{np: 3, flags: []string{"-H", "localhost:2", "--nooversubscribe"}, args: []string{"true"}}.run(t)
	if r.code != 2 || !strings.Contains(r.stderr, "3 ranks do not fit in the 2 slots of localhost:2") {
		t.Errorf("localhost:2 -np 3 --nooversubscribe: exit %d: %s", r.code, r.stderr)
	}
}

// TestNetnsHold builds the multi-host test bed and keeps it up for
// GORUN_TEST_NETNS_HOLD seconds, for experiments by hand (skipped
// otherwise).
func TestNetnsHold(t *testing.T) {
	s, _ := strconv.Atoi(os.Getenv("GORUN_TEST_NETNS_HOLD"))
	if s <= 0 {
		t.Skip("set GORUN_TEST_NETNS_HOLD=SECONDS to keep the multi-host test bed up for experiments")
	}
	nh := needNetHosts(t, 4, true)
	fmt.Printf("test bed up: --ssh-config %s (gorun %s); holding %d s\n", nh.config, gorunBin, s)
	time.Sleep(time.Duration(s) * time.Second)
}

// TestMultiHostMeasure prints the figures of issue 5's closing note:
// launch time of hello world across 3 hosts at np = 3, 6, 12, gorun
// against mpirun.openmpi on the same hosts through the same ssh config
// (medians of interleaved runs), and the time from a remote failure to
// the job's end. It is a measurement, not a test: it runs only with
// GORUN_TEST_MEASURE=N (N runs per figure).
func TestMultiHostMeasure(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("GORUN_TEST_MEASURE"))
	if runs <= 0 {
		t.Skip("set GORUN_TEST_MEASURE=RUNS to measure multi-host launch and failure times")
	}
	nh := needNetHosts(t, 3, false)
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello")
	if out, err := exec.Command("go", "build", "-o", hello, "../examples/hello").CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}
	chello := filepath.Join(dir, "hello_c")
	haveOMPI := exec.Command("mpicc.openmpi", "-O2", "-o", chello, "openmpi/hello.c").Run() == nil
	timeIt := func(name string, args ...string) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, name, args...)
		start := time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	cidr := nsNet + ".0/24"
	for _, np := range []int{3, 6, 12} {
		hosts := fmt.Sprintf("h1:%d,h2:%d,h3:%d", np/3, np/3, np/3)
		var g, o []time.Duration
		for i := 0; i < runs; i++ {
			g = append(g, timeIt(gorunBin, "--timeout", "60", "--ssh-config", nh.config, "-H", hosts, "-np", strconv.Itoa(np), hello))
			if haveOMPI {
				o = append(o, timeIt("mpirun.openmpi", "--timeout", "60", "--allow-run-as-root", "--mca", "plm_rsh_agent", "ssh -F "+nh.config,
					"--mca", "oob_tcp_if_include", cidr, "--mca", "btl_tcp_if_include", cidr, "-H", hosts, "-np", strconv.Itoa(np), chello))
			}
		}
		line := fmt.Sprintf("launch hello np=%-2d on 3 hosts: gorun median %v", np, median(g).Round(time.Millisecond))
		if haveOMPI {
			line += fmt.Sprintf(", mpirun.openmpi median %v, ratio %.2f", median(o).Round(time.Millisecond), float64(median(g))/float64(median(o)))
		}
		t.Log(line)
	}
	faults := []struct {
		name  string
		fault func(dir string)
		heal  func()
	}{
		{"remote rank SIGKILL", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "pid.4"))
			pid, _ := strconv.Atoi(string(b))
			syscall.Kill(pid, syscall.SIGKILL)
		}, nil},
		{"agent SIGKILL", func(string) { syscall.Kill(nh.findProc(2, "--agent"), syscall.SIGKILL) }, nil},
		{"host frozen", func(string) { nh.freeze(3, false) }, func() { nh.freeze(3, true) }},
		{"host cut off", func(string) { nh.isolate(2, true) }, func() { nh.isolate(2, false) }},
	}
	for _, f := range faults {
		var d []time.Duration
		for i := 0; i < runs; i++ {
			cmd, _, dir := nh.start6(t, "mhblock")
			t0 := time.Now()
			f.fault(dir)
			cmd.Wait()
			d = append(d, time.Since(t0))
			if f.heal != nil {
				f.heal()
			}
			nh.checkNothingLeftOnHosts(t, 6*time.Second)
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%-20s -> job end: median %v, max %v (n=%d)", f.name, median(d).Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), len(d))
	}
	// False verdicts: a live host paused (all its processes stopped) for
	// a while, and a host loaded with CPU hogs (two per core of this
	// machine, at nice 0, for 5 s), while the job runs allreduces. Each
	// run either ends normally or was wrongly ended by a death verdict.
	type pause struct {
		name string
		run  func()
	}
	var pauses []pause
	for _, p := range []time.Duration{1500 * time.Millisecond, 2 * time.Second, 2200 * time.Millisecond, 2600 * time.Millisecond} {
		pauses = append(pauses, pause{fmt.Sprintf("host paused %v", p), func() { nh.freeze(3, false); time.Sleep(p); nh.freeze(3, true) }})
	}
	pauses = append(pauses, pause{fmt.Sprintf("host loaded (%d hogs, 5 s)", 2*runtime.NumCPU()), func() {
		var hogs []*exec.Cmd
		for i := 0; i < 2*runtime.NumCPU(); i++ {
			h := exec.Command("ip", "netns", "exec", nh.ns(2), "sh", "-c", "while :; do :; done")
			if h.Start() == nil {
				hogs = append(hogs, h)
			}
		}
		time.Sleep(5 * time.Second)
		for _, h := range hogs {
			h.Process.Kill()
			h.Wait()
		}
	}})
	for _, f := range pauses {
		survived := 0
		var why []string
		for i := 0; i < runs; i++ {
			cmd, errb, dir := nh.start6(t, "mhpausable")
			f.run()
			time.Sleep(time.Second)
			os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
			cmd.Wait()
			if cmd.ProcessState.ExitCode() == 0 {
				survived++
			} else if v := verdictLines(errb.String()); len(v) > 0 {
				why = append(why, v[len(v)-1])
			}
			nh.checkNothingLeftOnHosts(t, 6*time.Second)
		}
		t.Logf("%-28s -> job survived %d of %d %v", f.name, survived, runs, why)
	}
}

// TestSlurmAllocation (issue 13): inside a Slurm allocation (its
// variables set as sbatch sets them), `gorun PROGRAM` with no -np or host
// list runs the allocation's tasks on its nodes, starting one agent per
// node with srun; here a stand-in srun that runs its command over ssh on
// the node it names, as slurmd would start it there.
func TestSlurmAllocation(t *testing.T) {
	nh := needNetHosts(t, 2, false) // a shared /tmp: srun's agents need gorun and the program at the same path
	bin := t.TempDir()
	log := filepath.Join(bin, "srun.log")
	script := "#!/bin/bash\n" +
		"# stand-in srun: srun [options] COMMAND...: COMMAND on --nodelist's node, over ssh\n" +
		"node=\n" +
		"while [[ $1 == -* ]]; do case $1 in --nodelist=*) node=${1#--nodelist=};; esac; echo \"$1\" >> " + log + "; shift; done\n" +
		"exec ssh -F " + nh.config + " \"$node\" \"$(printf '%q ' \"$@\")\"\n"
	if err := os.WriteFile(filepath.Join(bin, "srun"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	slurm := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=h[1-2]", "SLURM_TASKS_PER_NODE=2,1", "SLURM_JOB_CPUS_PER_NODE=4(x2)"}
	run := func(args ...string) (string, string) {
		c := exec.Command(gorunBin, append([]string{"--timeout", "60", "--display-map"}, args...)...)
		c.Env = append(os.Environ(), slurm...)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("gorun %v in the allocation: %v\n%s\n%s", args, err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	out, errs := run("sh", "-c", whereAmI)
	got := placementOf(t, out)
	for r, w := range []string{"h1", "h1", "h2"} {
		if got[r][0] != w {
			t.Errorf("rank %d on %s, want %s: %v\n%s", r, got[r][0], w, got, errs)
		}
	}
	if len(got) != 3 || !strings.Contains(errs, "from Slurm job 77 (SLURM_TASKS_PER_NODE: 2)") {
		t.Errorf("%d ranks, want SLURM_TASKS_PER_NODE's 3:\n%s", len(got), errs)
	}
	b, _ := os.ReadFile(log)
	for _, w := range []string{"--nodelist=h1", "--nodelist=h2", "--ntasks-per-node=1", "--cpus-per-task=4", "--overlap"} {
		if !strings.Contains(string(b), w+"\n") {
			t.Errorf("srun was not given %s:\n%s", w, b)
		}
	}
	// MPI across the nodes, wired up through the agents srun started.
	out, errs = run("-x", "GORUN_TEST_CASE=mpmd", os.Args[0], "-test.run=^$")
	for r := range 3 {
		if want := fmt.Sprintf("rank %d of 3 (sum 3)", r); !strings.Contains(out, want) {
			t.Errorf("missing %q:\n%s\n%s", want, out, errs)
		}
	}
	nh.checkNothingLeftOnHosts(t, 5*time.Second)
}
