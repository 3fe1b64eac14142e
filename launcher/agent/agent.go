package agent

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/internal/hostinfo"
)

// Flag is the first argument that turns the gorun binary into a per-host
// agent (Main); cmd/gorun checks for it before parsing its own flags.
const Flag = "--agent"

// Options configure one agent.
type Options struct {
	// Progs are the programs the launcher will run here, and ProgIDs
	// their hostinfo.FileID on the launcher's host: the hello's ProgOK
	// says, per program, whether this host has the same file at the same
	// path (else the launcher copies it or gives up).
	Progs, ProgIDs []string
	// Addr, when set, is the address the ranks listen on (an agent in the
	// launcher's process: the launcher's own choice). Otherwise IfInclude
	// picks it by interface name or CIDR, or, empty, the address ssh
	// reached this host at, or the first real interface's.
	Addr      string
	IfInclude string
	// Beat is the heartbeat interval (0: agentproto.Beat). Timeout is the
	// launcher's silence after which the agent kills its ranks and ends;
	// 0 never (an agent in the launcher's process dies with it).
	Beat, Timeout time.Duration
	// Stdin, when set, is given as is to a rank spawned with Stdin (an
	// agent in the launcher's process hands on the launcher's own stdin
	// when it is a file or a pipe: nothing is read that the rank does not
	// read). Otherwise that rank reads what the stdin frames bring (a
	// terminal comes that way: the rank, in a process group of its own,
	// could not read it).
	Stdin *os.File
	// Log receives the agent's own diagnostics, a line each (nil:
	// os.Stderr).
	Log io.Writer
}

// agent is the state of one agent.
type agent struct {
	opt  Options
	out  *agentproto.Writer // one write per frame: nothing to flush
	wmu  sync.Mutex
	werr error

	mu      sync.Mutex
	ranks   map[int]*rank
	jobID   string
	secret  []byte
	closing bool
	stdin   *byteQueue // to rank 0, nil until rank 0 is spawned with stdin frames

	heard atomic.Int64 // unix nanoseconds of the launcher's last frame
	done  chan struct{}
	once  sync.Once
}

// Main runs the gorun binary as the agent of a remote host, started by the
// launcher over ssh or srun: stdin and stdout carry the protocol, stderr
// the agent's own diagnostics. args are what follows Flag. It returns the
// exit status for the agent process once the launcher says bye, goes away
// or falls silent, or a signal ends it; by then every rank it started has
// been killed and reaped.
func Main(args []string) int {
	fs := flag.NewFlagSet("gorun "+Flag, flag.ContinueOnError)
	var opt Options
	fs.Func("prog", "a program the launcher will run (repeated, in order)", func(s string) error {
		opt.Progs = append(opt.Progs, s)
		return nil
	})
	fs.Func("prog-id", "size:mtime of the launcher's copy of each -prog, in order", func(s string) error {
		opt.ProgIDs = append(opt.ProgIDs, s)
		return nil
	})
	fs.StringVar(&opt.IfInclude, "if-include", "", "interface names or CIDRs for the ranks' addresses")
	version := fs.Int("version", 0, "protocol version the launcher speaks")
	fs.DurationVar(&opt.Beat, "beat", agentproto.Beat(), "heartbeat interval (the launcher's GORUN_AGENT_HEARTBEAT)")
	fs.DurationVar(&opt.Timeout, "timeout", agentproto.Timeout(), "silence after which the ranks are killed (the launcher's GORUN_AGENT_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version != agentproto.Version {
		fmt.Fprintf(os.Stderr, "agent speaks protocol %d, the launcher %d\n", agentproto.Version, *version)
		return 2
	}
	if len(opt.Progs) != len(opt.ProgIDs) {
		fmt.Fprintf(os.Stderr, "agent: %d -prog and %d -prog-id\n", len(opt.Progs), len(opt.ProgIDs))
		return 2
	}
	// Our stdout is the protocol: nothing else may write to it.
	out := os.Stdout
	os.Stdout = os.Stderr
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "agent: got %v; killing the ranks\n", s)
		close(stop)
	}()
	Serve(os.Stdin, out, opt, stop)
	return 0
}

// Serve runs one agent: it reads the launcher's frames from r and writes
// its own to w, starting and relaying ranks, until the launcher says bye,
// its stream ends or falls silent (Options.Timeout), or stop is closed.
// It returns once every rank it started has been killed and reaped
// (waiting at most reapWait) and the job's shared-memory segments on this
// host are gone; it closes w then. Serve blocks; an agent in the
// launcher's process runs it on a goroutine of its own.
func Serve(r io.Reader, w io.WriteCloser, opt Options, stop <-chan struct{}) {
	if opt.Beat <= 0 {
		opt.Beat = agentproto.Beat()
	}
	if opt.Log == nil {
		opt.Log = os.Stderr
	}
	a := &agent{opt: opt, out: agentproto.NewWriter(w), ranks: map[int]*rank{}, done: make(chan struct{})}
	a.heard.Store(time.Now().UnixNano())
	a.send(a.hello())
	go a.readLoop(r)
	go a.beat()
	select {
	case <-a.done:
	case <-stop:
	}
	a.shutdown()
	a.wmu.Lock()
	a.werr = errClosed
	a.wmu.Unlock()
	w.Close()
}

// streamBuf is the read buffer of the launcher's stream: a few frames at
// once.
const streamBuf = 64 << 10

var errClosed = errors.New("agent: stream closed")

// hello is the agent's first frame: who and where it is, and which of the
// launcher's programs it has.
func (a *agent) hello() *agentproto.Msg {
	cpus := hostinfo.AllowedCPUs()
	m := &agentproto.Msg{Kind: agentproto.Hello, Version: agentproto.Version, PID: os.Getpid(), CPUs: cpus, NCPU: len(cpus), Addr: a.opt.Addr}
	m.Host, _ = os.Hostname()
	if m.Addr == "" {
		addrs := hostinfo.Addrs()
		if a.opt.IfInclude != "" {
			ip, err := hostinfo.MatchIfInclude(a.opt.IfInclude, addrs)
			if err != nil {
				m.Err = err.Error()
			} else {
				m.Addr = ip.String()
			}
		} else {
			via := ""
			if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
				via = f[2]
			}
			m.Addr = hostinfo.DefaultAddr(via, addrs).String()
		}
	}
	for i, p := range a.opt.Progs {
		m.ProgOK = append(m.ProgOK, p != "" && hostinfo.FileID(p) == a.opt.ProgIDs[i])
	}
	return m
}

// logf writes one diagnostic line.
func (a *agent) logf(format string, args ...any) {
	fmt.Fprintf(a.opt.Log, "agent: "+format+"\n", args...)
}

// send writes one frame to the launcher. Frames from many goroutines are
// serialized; a broken stream stops the agent.
func (a *agent) send(m *agentproto.Msg) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.werr != nil {
		return
	}
	if err := a.out.Write(m); err != nil {
		a.werr = err
	}
	if a.werr != nil {
		a.logf("writing to the launcher: %v; killing the ranks", a.werr)
		a.stop()
	}
}

func (a *agent) stop() { a.once.Do(func() { close(a.done) }) }

// readLoop handles the launcher's frames until the stream ends.
func (a *agent) readLoop(r io.Reader) {
	fr := agentproto.NewReader(bufio.NewReaderSize(r, streamBuf))
	for {
		m, err := fr.Read()
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) {
				a.logf("reading from the launcher: %v; killing the ranks", err)
			}
			a.stop()
			return
		}
		a.heard.Store(time.Now().UnixNano())
		switch m.Kind {
		case agentproto.Setup:
			a.mu.Lock()
			a.jobID, a.secret = m.JobID, m.Secret
			a.mu.Unlock()
		case agentproto.Spawn:
			a.spawn(m)
		case agentproto.Stdin:
			a.mu.Lock()
			if a.stdin != nil {
				a.stdin.put(bytes.Clone(m.Data)) // fr reuses m.Data
			}
			a.mu.Unlock()
		case agentproto.Signal:
			a.signalAll(syscall.Signal(m.Sig))
		case agentproto.Kill:
			a.kill(m.Rank)
		case agentproto.Bye:
			a.stop()
			return
		}
	}
}

// beat sends heartbeats and stops the agent when the launcher falls
// silent (a frozen launcher or a cut network), and reports ranks stopped
// or running again.
func (a *agent) beat() {
	t := time.NewTicker(a.opt.Beat)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if since := time.Since(time.Unix(0, a.heard.Load())); a.opt.Timeout > 0 && since > a.opt.Timeout {
			a.logf("no word from the launcher for %v; killing the ranks", since.Round(time.Millisecond))
			a.stop()
			return
		}
		// A writer blocked on a launcher that does not read must not
		// block the silence check: skip the beat, the writer is news.
		if a.wmu.TryLock() {
			if a.werr == nil && a.out.Write(&agentproto.Msg{Kind: agentproto.Heartbeat}) != nil {
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
// state frame for every rank stopped or continued since the last call:
// the launcher needs it to tell a stopped rank (dead to its peers) from a
// busy one when the failure detector gives up on it.
func (a *agent) stateChanges() []*agentproto.Msg {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ms []*agentproto.Msg
	for _, r := range a.ranks {
		if r.exited || r.pid <= 0 {
			continue
		}
		if stopped := hostinfo.Stopped(hostinfo.ProcState(r.pid)); stopped != r.stopped {
			r.stopped = stopped
			ms = append(ms, &agentproto.Msg{Kind: agentproto.State, Rank: r.rank, Stopped: stopped})
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

// reapWait bounds how long shutdown waits for killed ranks to be reaped
// (a process in uninterruptible sleep cannot die at once).
const reapWait = time.Second

// shutdown kills every rank's process group, reaps them (bounded), and
// removes the job's shared-memory segments on this host.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closing = true
	var live []*rank
	for _, r := range a.ranks {
		syscall.Kill(-r.pid, syscall.SIGKILL)
		if !r.exited {
			live = append(live, r)
		}
	}
	id := a.jobID
	if a.stdin != nil {
		a.stdin.close()
		a.stdin = nil
	}
	a.mu.Unlock()
	deadline := time.After(reapWait)
	for _, r := range live {
		select {
		case <-r.reaped:
		case <-deadline:
		}
	}
	if id != "" {
		hostinfo.RemoveSegments(id)
	}
}
