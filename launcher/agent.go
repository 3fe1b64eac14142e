package launcher

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

// AgentFlag is the first argument that turns the gorun binary into a
// per-host agent (see RunAgent); cmd/gorun checks for it before parsing
// its own flags.
const AgentFlag = "--agent"

// agent is the state of one per-host agent.
type agent struct {
	out  *bufio.Writer
	wmu  sync.Mutex
	werr error

	mu      sync.Mutex
	ranks   map[int]*agentRank
	jobID   string
	secret  []byte
	closing bool
	stdin   *byteQueue // to rank 0, nil until rank 0 is spawned with stdin

	heard     atomic.Int64 // unix nanoseconds of the launcher's last frame
	beatEvery time.Duration
	limit     time.Duration
	done      chan struct{}
	once      sync.Once
}

// agentRank is one rank started by the agent.
type agentRank struct {
	rank    int
	cmd     *exec.Cmd
	pid     int
	exited  bool
	stopped bool // as last reported to the launcher
}

// RunAgent runs the per-host agent on the launcher's ssh session: stdin
// and stdout carry the agent protocol (agentproto.go), stderr the agent's
// own diagnostics. args are what follows AgentFlag. It returns the exit
// status for the agent process once the launcher says bye, goes away or
// falls silent; by then every rank it started has been killed and reaped.
func RunAgent(args []string) int {
	fs := flag.NewFlagSet("gorun --agent", flag.ContinueOnError)
	prog := fs.String("prog", "", "program path the launcher wants to run")
	progID := fs.String("prog-id", "", "size:mtime of the launcher's copy of the program")
	ifInclude := fs.String("if-include", "", "interface names or CIDRs for the ranks' addresses")
	version := fs.Int("version", 0, "protocol version the launcher speaks")
	beat := fs.Duration("beat", pAgentBeat(), "heartbeat interval (the launcher's GORUN_AGENT_HEARTBEAT)")
	timeout := fs.Duration("timeout", pAgentTimeout(), "silence after which the ranks are killed (the launcher's GORUN_AGENT_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version != agentProtoVersion {
		fmt.Fprintf(os.Stderr, "agent speaks protocol %d, the launcher %d\n", agentProtoVersion, *version)
		return 2
	}
	// Our stdout is the protocol: nothing else may write to it.
	out := os.Stdout
	os.Stdout = os.Stderr
	a := &agent{out: bufio.NewWriterSize(out, 64<<10), ranks: map[int]*agentRank{}, done: make(chan struct{}), beatEvery: *beat, limit: *timeout}
	a.heard.Store(time.Now().UnixNano())

	hello := &agentMsg{Kind: "hello", Version: agentProtoVersion, PID: os.Getpid(), NCPU: runtime.NumCPU()}
	hello.Host, _ = os.Hostname()
	hello.CPUs = allowedCPUs()
	hello.NCPU = len(hello.CPUs)
	addrs := localAddrs()
	if *ifInclude != "" {
		ip, err := matchIfInclude(*ifInclude, addrs)
		if err != nil {
			hello.Err = err.Error()
		} else {
			hello.Addr = ip.String()
		}
	} else {
		via := ""
		if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
			via = f[2]
		}
		hello.Addr = defaultAddr(via, addrs).String()
	}
	hello.ProgOK = *prog != "" && fileID(*prog) == *progID
	a.send(hello)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	go a.readLoop(os.Stdin)
	go a.beat()
	select {
	case <-a.done:
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "agent: got %v; killing the ranks\n", s)
	}
	a.shutdown()
	return 0
}

// fileID identifies a file's version cheaply, as rsync's quick check does:
// size and modification time. Copies are verified by checksum instead.
func fileID(path string) string {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Size(), st.ModTime().Unix())
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		cpus := make([]int, runtime.NumCPU())
		for i := range cpus {
			cpus[i] = i
		}
		return cpus
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// send writes one frame to the launcher. Frames from many goroutines are
// serialized; a broken stream stops the agent.
func (a *agent) send(m *agentMsg) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.werr != nil {
		return
	}
	if err := writeAgentMsg(a.out, m); err != nil {
		a.werr = err
	} else if err := a.out.Flush(); err != nil {
		a.werr = err
	}
	if a.werr != nil {
		fmt.Fprintf(os.Stderr, "agent: writing to the launcher: %v; killing the ranks\n", a.werr)
		a.stop()
	}
}

func (a *agent) stop() { a.once.Do(func() { close(a.done) }) }

// readLoop handles the launcher's frames until the stream ends.
func (a *agent) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		m, err := readAgentMsg(br)
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(os.Stderr, "agent: reading from the launcher: %v; killing the ranks\n", err)
			}
			a.stop()
			return
		}
		a.heard.Store(time.Now().UnixNano())
		switch m.Kind {
		case "setup":
			a.mu.Lock()
			a.jobID, a.secret = m.JobID, m.Secret
			a.mu.Unlock()
		case "spawn":
			a.spawn(m)
		case "stdin":
			a.mu.Lock()
			if a.stdin != nil {
				a.stdin.put(m.Data)
			}
			a.mu.Unlock()
		case "signal":
			a.signalAll(syscall.Signal(m.Sig))
		case "kill":
			a.kill(m.Rank)
		case "bye":
			a.stop()
			return
		}
	}
}

// beat sends heartbeats and stops the agent when the launcher falls
// silent (a frozen launcher or a cut network).
func (a *agent) beat() {
	t := time.NewTicker(a.beatEvery)
	defer t.Stop()
	limit := a.limit
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if since := time.Since(time.Unix(0, a.heard.Load())); since > limit {
			fmt.Fprintf(os.Stderr, "agent: no word from the launcher for %v; killing the ranks\n", since.Round(time.Millisecond))
			a.stop()
			return
		}
		// A writer blocked on a launcher that does not read must not
		// block the silence check: skip the beat, the writer is news.
		if a.wmu.TryLock() {
			if a.werr == nil && (writeAgentMsg(a.out, &agentMsg{Kind: "hb"}) != nil || a.out.Flush() != nil) {
				a.werr = fmt.Errorf("heartbeat failed")
			}
			a.wmu.Unlock()
			for _, m := range a.stateChanges() {
				a.send(m)
			}
		}
	}
}

// stateChanges reads the state of each live rank's process and returns a
// "state" message for every rank stopped or continued since the last
// call: the launcher needs it to tell a stopped rank (dead to its peers)
// from a busy one when the failure detector gives up on it.
func (a *agent) stateChanges() []*agentMsg {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ms []*agentMsg
	for _, r := range a.ranks {
		if r.exited || r.pid <= 0 {
			continue
		}
		st := procState(r.pid)
		if stopped := st == 'T' || st == 't'; stopped != r.stopped {
			r.stopped = stopped
			ms = append(ms, &agentMsg{Kind: "state", Rank: r.rank, Stopped: stopped})
		}
	}
	return ms
}

func (a *agent) signalAll(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.ranks {
		if !r.exited {
			syscall.Kill(-r.pid, sig)
		}
	}
}

// kill SIGKILLs one rank's process group (a rank gorun declared failed
// under --enable-recovery).
func (a *agent) kill(rank int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.ranks[rank]; r != nil && !r.exited {
		syscall.Kill(-r.pid, syscall.SIGKILL)
	}
}

// shutdown kills every rank's process group, reaps them (bounded), and
// removes the job's shared-memory segments on this host.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closing = true
	var live []*agentRank
	for _, r := range a.ranks {
		syscall.Kill(-r.pid, syscall.SIGKILL)
		if !r.exited {
			live = append(live, r)
		}
	}
	id := a.jobID
	a.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	for _, r := range live {
		for time.Now().Before(deadline) {
			a.mu.Lock()
			ex := r.exited
			a.mu.Unlock()
			if ex {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if id != "" {
		RemoveSegments(id)
	}
}

// spawn starts one rank as the launcher asked, with its stdio and control
// socket relayed over the protocol.
func (a *agent) spawn(m *agentMsg) {
	a.mu.Lock()
	secret, closing := a.secret, a.closing
	a.mu.Unlock()
	if closing {
		return
	}
	fail := func(err error) {
		a.send(&agentMsg{Kind: "started", Rank: m.Rank, Err: err.Error()})
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
	outR, outW, err := os.Pipe()
	if err != nil {
		fail(err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		fail(err)
		return
	}
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
	if m.Stdin {
		var inR *os.File
		inR, inW, err = os.Pipe()
		if err != nil {
			fail(err)
			return
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	err = startBound(cmd, m.Bind)
	outW.Close()
	errW.Close()
	ctlRank.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		ctl.Close()
		if inW != nil {
			inW.Close()
		}
		fail(err)
		return
	}
	r := &agentRank{rank: m.Rank, cmd: cmd, pid: cmd.Process.Pid}
	a.mu.Lock()
	a.ranks[m.Rank] = r
	if inW != nil {
		q := newByteQueue()
		a.stdin = q
		go func() {
			defer inW.Close()
			for {
				b, ok := q.get()
				if !ok || len(b) == 0 {
					return
				}
				if _, err := inW.Write(b); err != nil {
					return
				}
			}
		}()
	}
	a.mu.Unlock()
	a.send(&agentMsg{Kind: "started", Rank: m.Rank, PID: r.pid})
	boot.WriteCtl(ctl, boot.CtlMsg{Kind: boot.MsgHello, Secret: secret})

	var stdio sync.WaitGroup
	stdio.Add(2)
	relay := func(f *os.File, stream int) {
		defer stdio.Done()
		defer f.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				a.send(&agentMsg{Kind: "out", Rank: m.Rank, Stream: stream, Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				return
			}
		}
	}
	go relay(outR, 1)
	go relay(errR, 2)
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		for {
			c, err := boot.ReadCtl(ctl)
			if err != nil {
				return
			}
			a.send(&agentMsg{Kind: "ctl", Rank: m.Rank, Ctl: &c})
		}
	}()
	go func() {
		cmd.Wait()
		// The rank's last output and control messages go before its
		// exit; a grandchild holding the pipes must not delay it long.
		stdioDone := make(chan struct{})
		go func() { stdio.Wait(); close(stdioDone) }()
		grace := time.After(200 * time.Millisecond)
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
		if m.Stdin && a.stdin != nil {
			a.stdin.close()
			a.stdin = nil
		}
		a.mu.Unlock()
		a.send(&agentMsg{Kind: "exited", Rank: m.Rank, Status: uint32(ws)})
	}()
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
		return fmt.Errorf("bind to %s: %w", cpuList(cpus), err)
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
