package launcher

// The launcher's side of one host's agent, whichever backend started it:
// the frames it sends and reads, heartbeats, and the end of the stream.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/agentproto"
)

// agentConn is the launcher's side of one host's agent: the stream to and
// from it, started by one of the backends (local.go, sshagent.go,
// srun.go), which differ in nothing else.
type agentConn struct {
	name  string
	idx   int    // index in job.hosts
	from  net.IP // the launcher's address on the (first hop's) connection, if any
	proc  agentProc
	in    io.WriteCloser
	out   *bufio.Reader
	hello *agentproto.Msg
	// progs is the path on this host of each of the job's programs that
	// runs here (programs), once copyProg has copied the ones the hello
	// says the host lacks; nil copyProg: it cannot copy (copyWhy says
	// what is needed instead).
	progs    []string
	copyProg func(prog string) (string, error)
	copyWhy  string
	// inProcess: the agent runs in the launcher's own process (local.go).
	// It cannot be cut off or freeze apart from the launcher, so its
	// silence never means a lost host; its ranks inherit gorun's
	// environment, and rank 0 gets gorun's stdin file itself when
	// directStdin is set.
	inProcess   bool
	directStdin bool

	sendq   chan *agentproto.Msg
	heard   atomic.Int64  // unix nanoseconds of the agent's last frame
	busy    atomic.Bool   // the reader is blocked writing the ranks' output
	done    chan struct{} // closed when the agent's stream has ended
	quit    chan struct{} // closed by close
	closed  atomic.Bool
	errTail *tailBuffer // the agent's stderr, for error messages
}

// agentProc is how a host's agent was started, as far as the launcher's
// side of the protocol cares: the stream is the same for every backend.
type agentProc interface {
	// exitReason waits at most d for the agent's end and says how it
	// ended; streamErr is the error that ended its stream.
	exitReason(d time.Duration, streamErr error) string
	// kill ends the agent's transport (the ssh connection, the srun
	// process, the in-process agent's pipes); the agent then kills its
	// ranks.
	kill()
}

func newAgentConn(name string, idx int) *agentConn {
	return &agentConn{name: name, idx: idx, done: make(chan struct{}), quit: make(chan struct{}), errTail: &tailBuffer{}}
}

// agentConfig is what the backends need from the job.
type agentConfig struct {
	ssh       *sshSettings
	gorun     string   // this binary
	progs     []string // the job's programs (one per app), absolute
	progIDs   []string // their hostinfo.FileID here
	ifInclude string
	sums      *fileSums
	stderr    *output // for the agents' diagnostics
	// srun, when set, starts the agents with this srun (Spec.Agents);
	// cpus is each node's CPUs in the allocation, for the step.
	srun string
	cpus map[string]int
}

// errNoHello: readHello's wait ran out.
var errNoHello = errors.New("no hello in time")

// readHello reads an agent's first message from r, waiting at most
// timeout (then errNoHello; the reading goroutine ends when the caller
// closes the agent's stream).
func readHello(r io.Reader, timeout time.Duration) (*agentproto.Msg, error) {
	type res struct {
		m   *agentproto.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := agentproto.Read(r)
		ch <- res{m, err}
	}()
	select {
	case x := <-ch:
		return x.m, x.err
	case <-time.After(timeout):
		return nil, errNoHello
	}
}

// checkHello refuses a first message that is not hello in this protocol
// version, or that does not answer for every program.
func checkHello(m *agentproto.Msg, progs int) error {
	if m.Kind != agentproto.Hello || m.Version != agentproto.Version {
		return fmt.Errorf("the agent spoke %q version %d, not hello version %d", m.Kind, m.Version, agentproto.Version)
	}
	if m.Err == "" && len(m.ProgOK) != progs {
		return fmt.Errorf("the agent's hello answers for %d programs, not %d", len(m.ProgOK), progs)
	}
	return nil
}

// programs sets h.progs for the programs that run on this host (need):
// each at the launcher's path where the hello says the host has the same
// file there, else where copyProg puts it. A program named twice is
// copied once.
func (h *agentConn) programs(progs []string, need []bool) error {
	h.progs = make([]string, len(progs))
	copied := map[string]string{}
	for i, p := range progs {
		switch {
		case !need[i]:
		case h.hello.ProgOK[i]:
			h.progs[i] = p
		case copied[p] != "":
			h.progs[i] = copied[p]
		case h.copyProg == nil:
			return fmt.Errorf("%s is not there, or differs from this host's copy: %s", p, h.copyWhy)
		default:
			path, err := h.copyProg(p)
			if err != nil {
				return fmt.Errorf("copy %s to the host: %w", p, err)
			}
			h.progs[i], copied[p] = path, path
		}
	}
	return nil
}

// tailBuffer keeps the last few KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// prefixWriter writes each line it is given to o, prefixed.
type prefixWriter struct {
	o      *output
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.o.println(p.prefix + string(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// agentLog is where an agent's own diagnostics go: kept for error
// messages, and printed prefixed with the host.
func (h *agentConn) agentLog(stderr *output) io.Writer {
	return io.MultiWriter(h.errTail, &prefixWriter{o: stderr, prefix: "gorun: " + h.name + ": "})
}

// sendqLen bounds the frames waiting for an agent: spawns, signals,
// stdin chunks and beats; a full queue means the agent stopped reading.
// All spawns of a host are queued at once, while its agent forks one rank
// after another: a host of more than about sendqLen ranks would fail
// ("its agent stopped reading"), here as on other hosts.
const sendqLen = 4096

// startBeats starts sending the launcher's frames, heartbeats first: the
// agent kills itself after agentproto.Timeout of silence, and other hosts
// may still be connecting.
func (h *agentConn) startBeats() {
	h.sendq = make(chan *agentproto.Msg, sendqLen)
	go h.writeLoop()
	go h.everyBeat(func() bool {
		h.send(&agentproto.Msg{Kind: agentproto.Heartbeat}) // a full queue is news for watch
		return true
	})
}

// everyBeat calls f every agentproto.Beat until the agent's stream ends,
// close, or f returns false.
func (h *agentConn) everyBeat(f func() bool) {
	t := time.NewTicker(agentproto.Beat())
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-h.quit:
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

// run starts the goroutines that relay the agent's frames as job events
// and watch for its silence.
func (h *agentConn) run(j *job) {
	h.heard.Store(time.Now().UnixNano())
	go h.readLoop(j)
	if !h.inProcess {
		go h.watch(j)
	}
}

// send queues a frame for the agent without ever blocking the event loop.
// It reports false when the queue is full (the agent stopped reading).
func (h *agentConn) send(m *agentproto.Msg) bool {
	if h.closed.Load() {
		return false
	}
	select {
	case h.sendq <- m:
		return true
	default:
		return false
	}
}

func (h *agentConn) writeLoop() {
	w := bufio.NewWriterSize(h.in, 64<<10)
	fw := agentproto.NewWriter(w)
	for {
		select {
		case m := <-h.sendq:
			if fw.Write(m) != nil {
				return
			}
			if len(h.sendq) == 0 && w.Flush() != nil {
				return
			}
			if m.Kind == agentproto.Bye {
				h.in.Close()
				return
			}
		case <-h.done:
			return
		case <-h.quit:
			return
		}
	}
}

// readLoop turns the agent's frames into events until its stream ends.
func (h *agentConn) readLoop(j *job) {
	lines := map[[2]int]*lineWriter{}
	writer := func(rank, stream int) *lineWriter {
		k := [2]int{rank, stream}
		lw := lines[k]
		if lw == nil {
			o, name := j.out, "stdout"
			if stream == agentproto.Stderr {
				o, name = j.errOut, "stderr"
			}
			lw = o.lineWriter(rank, name)
			lines[k] = lw
		}
		return lw
	}
	fr := agentproto.NewReader(h.out) // m.Data is reused: every use below copies or is done with it at once
	var err error
	for {
		var m *agentproto.Msg
		m, err = fr.Read()
		if err != nil {
			break
		}
		h.heard.Store(time.Now().UnixNano())
		if m.Rank < 0 || m.Rank >= j.spec.NP {
			continue
		}
		switch m.Kind {
		case agentproto.Out:
			// gorun's own stdout may block (a pager, a full pipe): that
			// is backpressure, not a silent agent.
			h.busy.Store(true)
			writer(m.Rank, m.Stream).Write(m.Data)
			h.busy.Store(false)
		case agentproto.Started:
			var serr error
			if m.Err != "" {
				serr = errors.New(m.Err)
			}
			j.emit(event{kind: evStarted, rank: m.Rank, pid: m.PID, err: serr})
		case agentproto.Ctl:
			if m.Ctl != nil {
				j.emit(event{kind: evCtl, rank: m.Rank, msg: *m.Ctl})
			}
		case agentproto.State:
			j.emit(event{kind: evState, rank: m.Rank, stopped: m.Stopped})
		case agentproto.Exited:
			for s := agentproto.Stdout; s <= agentproto.Stderr; s++ {
				if lw := lines[[2]int{m.Rank, s}]; lw != nil {
					lw.Close()
				}
			}
			j.emit(event{kind: evExited, rank: m.Rank, ws: syscall.WaitStatus(m.Status)})
		}
	}
	for _, lw := range lines {
		lw.Close()
	}
	reason := "its connection ended"
	if !h.closed.Load() {
		reason = h.proc.exitReason(200*time.Millisecond, err)
		if tail := h.errTail.String(); tail != "" {
			reason += ": " + lastLine(tail)
		}
	}
	close(h.done)
	j.emit(event{kind: evAgentLost, host: h.idx, err: errors.New(reason)})
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// watch reports an agent that fell silent (a frozen host, or one cut off
// the network).
func (h *agentConn) watch(j *job) {
	limit := agentproto.Timeout()
	h.everyBeat(func() bool {
		if h.busy.Load() {
			h.heard.Store(time.Now().UnixNano())
		}
		if since := time.Since(time.Unix(0, h.heard.Load())); since > limit {
			j.emit(event{kind: evAgentLost, host: h.idx, err: fmt.Errorf("its agent has not answered for %v (host frozen or cut off?)", since.Round(100*time.Millisecond))})
			return false
		}
		return true
	})
}

// silentFor is how long the agent has been silent; an agent in the
// launcher's process never is.
func (h *agentConn) silentFor() time.Duration {
	if h.inProcess {
		return 0
	}
	return time.Since(time.Unix(0, h.heard.Load()))
}

// close ends the session: a bye for an agent that still listens, then the
// transport, waiting at most wait for the agent to finish.
func (h *agentConn) close(wait time.Duration) {
	if h.closed.Swap(true) {
		return
	}
	if wait > 0 && h.sendq != nil {
		select {
		case h.sendq <- &agentproto.Msg{Kind: agentproto.Bye}:
		default:
		}
		select {
		case <-h.done:
		case <-time.After(wait):
		}
	}
	close(h.quit)
	if h.proc != nil {
		h.proc.kill()
	}
}
