package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

// rank is one rank started by the agent.
type rank struct {
	rank    int
	pid     int
	exited  bool          // guarded by agent.mu
	stopped bool          // as last reported to the launcher; agent.mu
	reaped  chan struct{} // closed once exited is set
}

// relayBuf is the largest chunk of a rank's output in one out frame: a
// pipe's capacity, so one read takes all a fast writer left. Relaying 1 GB
// from 2 ranks on the 2-core machine took 6.0-6.2 s with it, 6.4-7.6 s
// with 32 KiB chunks; forwarded straight from the pipes (before this host's
// ranks went through an agent) 5.6-7.2 s.
const relayBuf = 64 << 10

// exitGrace bounds how long a rank's exit waits for its last output and
// control messages after the process is gone: a grandchild that inherited
// the pipes must not delay the verdict long.
const exitGrace = 200 * time.Millisecond

// spawn starts one rank as the launcher asked, with its stdio and control
// socket relayed over the protocol, and answers started.
func (a *agent) spawn(m *agentproto.Msg) {
	a.mu.Lock()
	secret, closing := a.secret, a.closing
	a.mu.Unlock()
	if closing {
		return
	}
	fail := func(err error) {
		a.send(&agentproto.Msg{Kind: agentproto.Started, Rank: m.Rank, Err: err.Error()})
	}
	if secret == nil {
		fail(fmt.Errorf("spawn before setup"))
		return
	}
	ctl, ctlRank, err := boot.CtlPair()
	if err != nil {
		fail(err)
		return
	}
	var files []*os.File // the rank's ends and ours, closed on failure
	pipe := func() (*os.File, *os.File) {
		if err != nil {
			return nil, nil
		}
		var r, w *os.File
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	outR, outW := pipe()
	errR, errW := pipe()
	cmd := exec.Command(m.Prog, m.Args...)
	cmd.Env = append(os.Environ(), m.Env...)
	if m.Dir != "" {
		if st, err := os.Stat(m.Dir); err == nil && st.IsDir() {
			cmd.Dir = m.Dir
		}
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{ctlRank}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var inW *os.File
	switch {
	case !m.Stdin:
	case a.opt.Stdin != nil:
		cmd.Stdin = a.opt.Stdin
	default:
		var inR *os.File
		inR, inW = pipe()
		cmd.Stdin = inR
	}
	if err == nil {
		err = startBound(cmd, m.Bind)
	}
	ctlRank.Close()
	for _, f := range files {
		if err != nil || (f != outR && f != errR && f != inW) {
			f.Close() // the rank's ends, or everything on failure
		}
	}
	if err != nil {
		ctl.Close()
		fail(explainExec(cmd.Path, err))
		return
	}
	r := &rank{rank: m.Rank, pid: cmd.Process.Pid, reaped: make(chan struct{})}
	a.mu.Lock()
	a.ranks[m.Rank] = r
	if inW != nil {
		q := newByteQueue()
		a.stdin = q
		go feed(inW, q)
	}
	a.mu.Unlock()
	a.send(&agentproto.Msg{Kind: agentproto.Started, Rank: m.Rank, PID: r.pid})
	boot.WriteCtl(ctl, boot.CtlMsg{Kind: boot.MsgHello, Secret: secret})

	var stdio sync.WaitGroup
	stdio.Add(2)
	relay := func(f *os.File, stream int) {
		defer stdio.Done()
		defer f.Close()
		buf := make([]byte, relayBuf)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				// send has written the frame when it returns: buf is free.
				a.send(&agentproto.Msg{Kind: agentproto.Out, Rank: m.Rank, Stream: stream, Data: buf[:n]})
			}
			if err != nil {
				return
			}
		}
	}
	go relay(outR, agentproto.Stdout)
	go relay(errR, agentproto.Stderr)
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		for {
			c, err := boot.ReadCtl(ctl)
			if err != nil {
				return
			}
			a.send(&agentproto.Msg{Kind: agentproto.Ctl, Rank: m.Rank, Ctl: &c})
		}
	}()
	go func() {
		awaitExit(cmd.Process)
		cmd.Wait()
		// The rank's last output and control messages go before its
		// exit, within exitGrace.
		stdioDone := make(chan struct{})
		go func() { stdio.Wait(); close(stdioDone) }()
		grace := time.After(exitGrace)
		select {
		case <-stdioDone:
		case <-grace:
		}
		select {
		case <-ctlDone:
		case <-grace:
		}
		ctl.Close()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		a.mu.Lock()
		r.exited = true
		if inW != nil && a.stdin != nil {
			a.stdin.close()
			a.stdin = nil
		}
		a.mu.Unlock()
		close(r.reaped)
		a.send(&agentproto.Msg{Kind: agentproto.Exited, Rank: m.Rank, Status: uint32(ws)})
	}()
}

// feed writes the stdin frames' chunks to a rank's stdin until the
// launcher's end of input, the rank's exit, or a write fails (the rank
// closed its stdin).
func feed(w *os.File, q *byteQueue) {
	defer w.Close()
	for {
		b, ok := q.get()
		if !ok || len(b) == 0 {
			return
		}
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// startBound starts cmd with its CPU affinity set to cpus (none: left
// alone). The affinity is set on this OS thread around the fork, so the
// child inherits it before its first instruction and every thread it
// creates inherits it in turn.
func startBound(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to CPUs %v: %w", cpus, err)
	}
	err := cmd.Start()
	// Restoring a mask the thread had before cannot be refused. The thread
	// must outlive its children anyway: Pdeathsig fires when it exits.
	unix.SchedSetaffinity(0, &old)
	return err
}

// byteQueue is an unbounded FIFO of chunks: the agent's reader never
// blocks on a rank that does not read its stdin (it would starve the
// heartbeats).
type byteQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      [][]byte
	closed bool
}

func newByteQueue() *byteQueue {
	q := &byteQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *byteQueue) put(b []byte) {
	q.mu.Lock()
	q.q = append(q.q, b)
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *byteQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// get returns the next chunk, waiting for one; false once closed.
func (q *byteQueue) get() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.q) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	b := q.q[0]
	q.q = q.q[1:]
	return b, true
}

// explainExec names the interpreter of a script whose exec failed because
// the interpreter on its #! line does not exist: the kernel's ENOENT reads
// as if the script itself were missing.
func explainExec(path string, err error) error {
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, ferr := os.Open(path)
	if ferr != nil {
		return err
	}
	defer f.Close()
	line := make([]byte, 256)
	n, _ := f.Read(line)
	line = line[:n]
	if !bytes.HasPrefix(line, []byte("#!")) {
		return err
	}
	line = line[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	// The kernel splits the line at spaces and tabs only: a script saved
	// with CRLF line ends asks for "/bin/sh\r", quoted below so that it
	// shows.
	interp := strings.FieldsFunc(string(line), func(r rune) bool { return r == ' ' || r == '\t' })
	if len(interp) == 0 {
		return err
	}
	return fmt.Errorf("%s: bad interpreter %q on its first line (#!): %w", path, interp[0], err)
}
