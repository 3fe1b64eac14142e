package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/internal/hostinfo"
	"golang.org/x/sys/unix"
)

// launcher is the test's side of one agent served over a pair of pipes,
// as the launcher's own host's agent is: it writes the launcher's frames
// and reads the agent's, with a deadline on every read.
type launcher struct {
	t      *testing.T
	toW    *os.File
	frames chan *agentproto.Msg // the agent's, heartbeats left out
	served chan struct{}        // closed when Serve has returned
	stop   chan struct{}
}

// deadline bounds every wait of these tests: far above what the agent
// needs, it only turns a hang into a failure.
const deadline = 10 * time.Second

func serve(t *testing.T, opt Options) *launcher {
	t.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if opt.Beat == 0 {
		opt.Beat = 10 * time.Millisecond
	}
	l := &launcher{t: t, toW: toW, frames: make(chan *agentproto.Msg, 1024), served: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		Serve(toR, fromW, opt, l.stop)
		toR.Close()
		close(l.served)
	}()
	go func() {
		defer close(l.frames)
		br := bufio.NewReader(fromR)
		for {
			m, err := agentproto.Read(br)
			if err != nil {
				fromR.Close()
				return
			}
			if m.Kind != agentproto.Heartbeat {
				l.frames <- m
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-l.stop:
		default:
			close(l.stop)
		}
		toW.Close()
		l.waitServed()
	})
	return l
}

func (l *launcher) send(m *agentproto.Msg) {
	l.t.Helper()
	if err := agentproto.Write(l.toW, m); err != nil {
		l.t.Fatalf("write %s: %v", m.Kind, err)
	}
}

// next returns the agent's next frame of kind (others of the rank are
// appended to skipped when given).
func (l *launcher) next(kind string, skipped *[]*agentproto.Msg) *agentproto.Msg {
	l.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case m, ok := <-l.frames:
			if !ok {
				l.t.Fatalf("the agent's stream ended while waiting for %s", kind)
			}
			if m.Kind == kind {
				return m
			}
			if skipped != nil {
				*skipped = append(*skipped, m)
			}
		case <-timeout:
			l.t.Fatalf("no %s frame within %v", kind, deadline)
		}
	}
}

func (l *launcher) waitServed() {
	l.t.Helper()
	select {
	case <-l.served:
	case <-time.After(deadline):
		l.t.Fatalf("Serve did not return within %v", deadline)
	}
}

// output joins the out frames of stream among ms.
func output(ms []*agentproto.Msg, stream int) string {
	var b strings.Builder
	for _, m := range ms {
		if m.Kind == agentproto.Out && m.Stream == stream {
			b.Write(m.Data)
		}
	}
	return b.String()
}

// gone reports whether process pid no longer exists (or is a zombie).
func gone(pid int) bool {
	st := hostinfo.ProcState(pid)
	return st == 0 || st == 'Z'
}

// TestServe runs real ranks (shell commands) through an agent: hello,
// spawn, stdin frames to the rank spawned with Stdin, stdout and stderr,
// exit status, signals, a failed spawn, and bye killing what is left.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755)
	l := serve(t, Options{Progs: []string{prog, prog}, ProgIDs: []string{hostinfo.FileID(prog), "0:0"}, Addr: "127.0.0.1"})

	h := l.next(agentproto.Hello, nil)
	if h.Version != agentproto.Version || h.Addr != "127.0.0.1" || h.PID != os.Getpid() || len(h.CPUs) == 0 {
		t.Errorf("hello %+v", h)
	}
	if len(h.ProgOK) != 2 || !h.ProgOK[0] || h.ProgOK[1] {
		t.Errorf("ProgOK %v, want [true false] (the second id differs)", h.ProgOK)
	}

	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 0, Prog: "/bin/true"})
	if m := l.next(agentproto.Started, nil); !strings.Contains(m.Err, "before setup") {
		t.Errorf("spawn before setup: %+v", m)
	}
	l.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: "agenttest", Secret: make([]byte, 32)})

	// Rank 0 reads stdin frames; its output and exit status come back.
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 0, Prog: "/bin/sh", Args: []string{"-c", `read x; echo "got $x $FOO"; echo oops >&2; exit 3`}, Env: []string{"FOO=bar"}, Dir: dir, Stdin: true})
	st := l.next(agentproto.Started, nil)
	if st.Err != "" || st.PID <= 0 {
		t.Fatalf("started %+v", st)
	}
	l.send(&agentproto.Msg{Kind: agentproto.Stdin, Data: []byte("hi\n")})
	l.send(&agentproto.Msg{Kind: agentproto.Stdin})
	var frames []*agentproto.Msg
	ex := l.next(agentproto.Exited, &frames)
	if ws := syscall.WaitStatus(ex.Status); ex.Rank != 0 || ws.ExitStatus() != 3 {
		t.Errorf("exited %+v, want rank 0 status 3", ex)
	}
	if out, errs := output(frames, agentproto.Stdout), output(frames, agentproto.Stderr); out != "got hi bar\n" || errs != "oops\n" {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}

	// A program that is not there.
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 1, Prog: filepath.Join(dir, "missing")})
	if m := l.next(agentproto.Started, nil); m.Rank != 1 || !strings.Contains(m.Err, "no such file") {
		t.Errorf("missing program: %+v", m)
	}

	// A signal reaches the rank's process group.
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 2, Prog: "/bin/sleep", Args: []string{"60"}})
	l.next(agentproto.Started, nil)
	l.send(&agentproto.Msg{Kind: agentproto.Signal, Sig: int(syscall.SIGUSR1)})
	if ws := syscall.WaitStatus(l.next(agentproto.Exited, nil).Status); !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("after SIGUSR1: %v", ws)
	}

	// bye kills what is left and removes the job's segments.
	seg := "/dev/shm/gorun-agenttest-x"
	os.WriteFile(seg, nil, 0o600)
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 3, Prog: "/bin/sleep", Args: []string{"60"}})
	pid := l.next(agentproto.Started, nil).PID
	l.send(&agentproto.Msg{Kind: agentproto.Bye})
	l.waitServed()
	if !gone(pid) {
		t.Errorf("rank 3 (pid %d) survived bye", pid)
	}
	if _, err := os.Stat(seg); err == nil {
		os.Remove(seg)
		t.Errorf("bye left %s", seg)
	}
}

// TestStateAndKill: a rank stopped and continued is reported both times;
// kill ends one rank and leaves the others.
func TestStateAndKill(t *testing.T) {
	l := serve(t, Options{Addr: "127.0.0.1"})
	l.next(agentproto.Hello, nil)
	l.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: "agenttest2", Secret: make([]byte, 32)})
	for r := range 2 {
		l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: r, Prog: "/bin/sleep", Args: []string{"60"}})
	}
	pids := map[int]int{}
	for range 2 {
		m := l.next(agentproto.Started, nil)
		pids[m.Rank] = m.PID
	}
	syscall.Kill(pids[1], syscall.SIGSTOP)
	if m := l.next(agentproto.State, nil); m.Rank != 1 || !m.Stopped {
		t.Errorf("after SIGSTOP: %+v", m)
	}
	syscall.Kill(pids[1], syscall.SIGCONT)
	if m := l.next(agentproto.State, nil); m.Rank != 1 || m.Stopped {
		t.Errorf("after SIGCONT: %+v", m)
	}
	l.send(&agentproto.Msg{Kind: agentproto.Kill, Rank: 0})
	if m := l.next(agentproto.Exited, nil); m.Rank != 0 || syscall.WaitStatus(m.Status).Signal() != syscall.SIGKILL {
		t.Errorf("after kill: %+v", m)
	}
	if gone(pids[1]) {
		t.Errorf("kill of rank 0 ended rank 1")
	}
	// The launcher's stream ends: the agent kills its ranks.
	l.toW.Close()
	l.waitServed()
	if !gone(pids[1]) {
		t.Errorf("rank 1 (pid %d) survived the end of the launcher's stream", pids[1])
	}
}

// TestSilentLauncher: with a Timeout, a launcher that stops sending ends
// the agent and its ranks; stop does as well.
func TestSilentLauncher(t *testing.T) {
	l := serve(t, Options{Addr: "127.0.0.1", Timeout: 200 * time.Millisecond})
	l.next(agentproto.Hello, nil)
	l.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: "agenttest3", Secret: make([]byte, 32)})
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 0, Prog: "/bin/sleep", Args: []string{"60"}})
	pid := l.next(agentproto.Started, nil).PID
	l.waitServed() // no heartbeats sent
	if !gone(pid) {
		t.Errorf("rank (pid %d) survived the launcher's silence", pid)
	}

	l = serve(t, Options{Addr: "127.0.0.1"})
	l.next(agentproto.Hello, nil)
	l.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: "agenttest4", Secret: make([]byte, 32)})
	l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: 0, Prog: "/bin/sleep", Args: []string{"60"}})
	pid = l.next(agentproto.Started, nil).PID
	close(l.stop)
	l.waitServed()
	if !gone(pid) {
		t.Errorf("rank (pid %d) survived stop", pid)
	}
}

// TestMainRefuses: the agent binary refuses a launcher of another
// protocol version, and -prog without its -prog-id.
func TestMainRefuses(t *testing.T) {
	if code := Main([]string{"-version", "1"}); code != 2 {
		t.Errorf("version 1: status %d", code)
	}
	if code := Main([]string{"-version", strconv.Itoa(agentproto.Version), "-prog", "/bin/true"}); code != 2 {
		t.Errorf("-prog without -prog-id: status %d", code)
	}
}

// TestWaitHoldsNoThread: ranks that run hold no thread of the agent in
// wait4 (a pidfd is awaited through the poller, awaitExit), and their exits
// are still reported, with the signal that ended them.
func TestWaitHoldsNoThread(t *testing.T) {
	const n = 12
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds here (%v): the agent waits in wait4", err)
	} else {
		unix.Close(fd)
	}
	l := serve(t, Options{Addr: "127.0.0.1"})
	l.next(agentproto.Hello, nil)
	l.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: "agenttest6", Secret: make([]byte, 32)})
	for r := range n {
		l.send(&agentproto.Msg{Kind: agentproto.Spawn, Rank: r, Prog: "/bin/sleep", Args: []string{"60"}})
	}
	for range n {
		l.next(agentproto.Started, nil)
	}
	// The goroutines that wait settle within moments; then no sample
	// may find a thread in wait4.
	time.Sleep(100 * time.Millisecond)
	named := 0
	for range 5 {
		waiting := 0
		tasks, _ := filepath.Glob("/proc/self/task/*/wchan")
		for _, p := range tasks {
			b, _ := os.ReadFile(p)
			if string(b) == "do_wait" {
				waiting++
			}
			if len(b) > 0 && string(b) != "0" {
				named++ // a thread asleep in the kernel, named
			}
		}
		if waiting > 0 {
			t.Errorf("%d threads in wait4 with %d ranks running, want none", waiting, n)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if named == 0 {
		t.Skip("the kernel hides where threads sleep (/proc/self/task/*/wchan)")
	}
	for r := range n {
		l.send(&agentproto.Msg{Kind: agentproto.Kill, Rank: r})
	}
	for range n {
		if m := l.next(agentproto.Exited, nil); syscall.WaitStatus(m.Status).Signal() != syscall.SIGKILL {
			t.Errorf("rank %d: exit status %#x, want killed", m.Rank, m.Status)
		}
	}
	l.toW.Close()
	l.waitServed()
}
