package launcher

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun/gorun/internal/params"
	"golang.org/x/crypto/ssh"
)

var pSkipRC = params.Int("GORUN_SSH_SKIP_RC", 1,
	"1 asks the remote shell to skip ~/.bashrc (SHLVL=1, where sshd accepts it) when starting agents: rc files cost 100+ ms; 0 leaves it alone")

// remoteHost is the launcher's side of one remote host: its ssh
// connection and the agent session on it.
type remoteHost struct {
	name   string
	idx    int // index in job.hosts
	client *ssh.Client
	local  net.IP // the launcher's address on the (first hop's) connection
	sess   *ssh.Session
	proc   agentProc // how the agent was started: ssh, or srun
	in     io.WriteCloser
	out    *bufio.Reader
	hello  *agentMsg
	prog   string // the program's path on this host

	sendq   chan *agentMsg
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
	// process); the agent then kills its ranks.
	kill()
}

// sshProc is an agent in an ssh session.
type sshProc struct {
	client *ssh.Client
	sess   *ssh.Session
}

func (p *sshProc) exitReason(d time.Duration, streamErr error) string {
	werr := waitWithin(p.sess, d)
	var ee *ssh.ExitError
	switch {
	case errors.As(werr, &ee) && ee.Signal() != "":
		return "the agent was killed by signal " + ee.Signal()
	case errors.As(werr, &ee):
		return fmt.Sprintf("the agent exited with status %d", ee.ExitStatus())
	case werr == nil:
		return "the agent exited"
	}
	return "the ssh connection was lost (" + streamErr.Error() + ")"
}

func (p *sshProc) kill() { p.client.Close() }

// agentExitMissing is the status of the start script when gorun's binary
// is not on the host (or differs from the launcher's).
const agentExitMissing = 97

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fileSums memoizes SHA-256 sums of local files (the program and gorun).
type fileSums struct {
	mu sync.Mutex
	m  map[string]*sumEntry
}

type sumEntry struct {
	once sync.Once
	sum  string
	err  error
}

func (f *fileSums) sum(path string) (string, error) {
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]*sumEntry{}
	}
	e := f.m[path]
	if e == nil {
		e = &sumEntry{}
		f.m[path] = e
	}
	f.mu.Unlock()
	e.once.Do(func() {
		fh, err := os.Open(path)
		if err != nil {
			e.err = err
			return
		}
		defer fh.Close()
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			e.err = err
			return
		}
		e.sum = hex.EncodeToString(h.Sum(nil))
	})
	return e.sum, e.err
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

// agentConfig is what connectHost needs from the job.
type agentConfig struct {
	ssh       *sshSettings
	gorun     string // this binary
	prog      string // the program, absolute
	ifInclude string
	sums      *fileSums
	stderr    *output // for the agent's diagnostics
	// srun, when set, starts the agents with this srun (Spec.Agents);
	// cpus is each node's CPUs in the allocation, for the step.
	srun string
	cpus map[string]int
}

// connectHost connects to name, makes sure gorun and the program are
// there (copying them, verified by checksum, when they are not), starts
// the agent and reads its hello.
func connectHost(cfg *agentConfig, name string, idx int, trace func(string, ...any)) (*remoteHost, error) {
	client, t, local, err := cfg.ssh.dial(name)
	if err != nil {
		return nil, err
	}
	trace("%s: ssh connected", name)
	h := &remoteHost{name: name, idx: idx, client: client, local: local, done: make(chan struct{}), quit: make(chan struct{}), errTail: &tailBuffer{}}
	fail := func(err error) (*remoteHost, error) {
		h.close(0)
		return nil, err
	}
	gorunID := fileID(cfg.gorun)
	var quoted []string
	for _, a := range agentArgv(cfg) {
		quoted = append(quoted, shellQuote(a))
	}
	agentArgs := strings.Join(quoted, " ")
	// Fast path: the same gorun (size and mtime) at the same path, as on a
	// shared file system.
	q := shellQuote(cfg.gorun)
	script := fmt.Sprintf(`if [ "$(stat -c %%s:%%Y %s 2>/dev/null)" = %s ]; then exec %s %s; fi; exit %d`, q, shellQuote(gorunID), q, agentArgs, agentExitMissing)
	err = h.startAgent(cfg, script, t.timeout)
	if errors.Is(err, errAgentMissing) {
		var path string
		if path, err = ensureFile(cfg, client, cfg.gorun, "gorun", t.timeout); err != nil {
			return fail(fmt.Errorf("copy gorun to the host: %w", err))
		}
		err = h.startAgent(cfg, "exec "+shellQuote(path)+" "+agentArgs, t.timeout)
	}
	if err != nil {
		return fail(err)
	}
	trace("%s: agent said hello", name)
	h.proc = &sshProc{client: client, sess: h.sess}
	h.startBeats()
	if h.hello.Err != "" {
		h.sess.Close()
		return fail(errors.New(h.hello.Err))
	}
	h.prog = cfg.prog
	if !h.hello.ProgOK {
		p, err := ensureFile(cfg, client, cfg.prog, filepath.Base(cfg.prog), t.timeout)
		if err != nil {
			h.sess.Close()
			return fail(fmt.Errorf("copy %s to the host: %w", cfg.prog, err))
		}
		h.prog = p
	}
	return h, nil
}

var errAgentMissing = errors.New("gorun is not on the host")

// agentArgv is the agent's command line after gorun's path.
func agentArgv(cfg *agentConfig) []string {
	a := []string{AgentFlag, "-version", fmt.Sprint(agentProtoVersion), "-beat", pAgentBeat().String(), "-timeout", pAgentTimeout().String(), "-prog", cfg.prog, "-prog-id", fileID(cfg.prog)}
	if cfg.ifInclude != "" {
		a = append(a, "-if-include", cfg.ifInclude)
	}
	return a
}

// startAgent runs script in a new session and waits for the agent's hello.
func (h *remoteHost) startAgent(cfg *agentConfig, script string, timeout time.Duration) error {
	s, err := h.client.NewSession()
	if err != nil {
		return fmt.Errorf("open an ssh session: %w", err)
	}
	// bash skips ~/.bashrc when SHLVL says it is not the first shell:
	// rc files that run version managers cost 100+ ms. Servers that do
	// not accept the variable just refuse it.
	if pSkipRC() == 1 {
		s.Setenv("SHLVL", "1")
	}
	in, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return err
	}
	out, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return err
	}
	s.Stderr = io.MultiWriter(h.errTail, &prefixWriter{o: cfg.stderr, prefix: "gorun: " + h.name + ": "})
	if err := s.Start(script); err != nil {
		s.Close()
		return fmt.Errorf("start the agent: %w", err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	m, err := readHello(br, timeout)
	if errors.Is(err, errNoHello) {
		s.Close()
		return fmt.Errorf("the agent did not answer within %v", timeout)
	}
	if err != nil {
		werr := waitWithin(s, time.Second)
		s.Close()
		var ee *ssh.ExitError
		if errors.As(werr, &ee) && ee.ExitStatus() == agentExitMissing {
			return errAgentMissing
		}
		msg := h.errTail.String()
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		return fmt.Errorf("the agent failed to start: %v (%s)", err, msg)
	}
	if err := checkHello(m); err != nil {
		s.Close()
		return err
	}
	h.sess, h.in, h.out, h.hello = s, in, br, m
	return nil
}

// errNoHello: readHello's wait ran out.
var errNoHello = errors.New("no hello in time")

// readHello reads an agent's first message from r, waiting at most
// timeout (then errNoHello; the reading goroutine ends when the caller
// closes the agent's stream).
func readHello(r io.Reader, timeout time.Duration) (*agentMsg, error) {
	type res struct {
		m   *agentMsg
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := readAgentMsg(r)
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
// version.
func checkHello(m *agentMsg) error {
	if m.Kind != "hello" || m.Version != agentProtoVersion {
		return fmt.Errorf("the agent spoke %q version %d, not hello version %d", m.Kind, m.Version, agentProtoVersion)
	}
	return nil
}

// waitWithin waits for a session's exit status, for at most d.
func waitWithin(s *ssh.Session, d time.Duration) error {
	ch := make(chan error, 1)
	go func() { ch <- s.Wait() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		return fmt.Errorf("no exit status within %v", d)
	}
}

// ensureFile makes sure a copy of the local file is in the host's gorun
// cache ($TMPDIR/gorun-cache-UID/SHA256-NAME, private to the user) and
// returns its path. A copy is verified by its SHA-256 before it is used.
func ensureFile(cfg *agentConfig, client *ssh.Client, local, name string, timeout time.Duration) (string, error) {
	sum, err := cfg.sums.sum(local)
	if err != nil {
		return "", err
	}
	dir := `d="${TMPDIR:-/tmp}/gorun-cache-$(id -u)"; f="$d/` + sum + "-" + strings.ReplaceAll(name, "/", "_") + `"; `
	check := dir + `if [ -O "$d" ] && [ -x "$f" ]; then echo "$f"; exit 0; fi; exit 98`
	out, err := runScript(client, check, nil, timeout)
	if err == nil {
		return strings.TrimSpace(out), nil
	}
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 98 {
		return "", err
	}
	fh, err := os.Open(local)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	put := dir + `umask 077; mkdir -p "$d" && [ -O "$d" ] || { echo "$d is not ours" >&2; exit 1; }; t="$f.$$"; ` +
		`if cat > "$t" && [ "$(sha256sum < "$t" | cut -c1-64)" = ` + sum + ` ] && chmod 700 "$t" && mv -f "$t" "$f"; then echo "$f"; exit 0; fi; ` +
		`rm -f "$t"; echo "the copy does not match the checksum ` + sum + `" >&2; exit 1`
	out, err = runScript(client, put, fh, 10*timeout+time.Minute)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// runScript runs one command in a new session, with stdin from in.
func runScript(client *ssh.Client, script string, in io.Reader, timeout time.Duration) (string, error) {
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	if pSkipRC() == 1 {
		s.Setenv("SHLVL", "1")
	}
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if in != nil {
		s.Stdin = in
	}
	ch := make(chan error, 1)
	go func() { ch <- s.Run(script) }()
	select {
	case err = <-ch:
	case <-time.After(timeout):
		return "", fmt.Errorf("no answer within %v", timeout)
	}
	if err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	return out.String(), nil
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

// startBeats starts sending the launcher's frames, heartbeats first: the
// agent kills itself after agentTimeout of silence, and other hosts may
// still be connecting.
func (h *remoteHost) startBeats() {
	h.sendq = make(chan *agentMsg, 4096)
	go h.writeLoop()
	go func() {
		t := time.NewTicker(pAgentBeat())
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-h.quit:
				return
			case <-t.C:
			}
			h.send(&agentMsg{Kind: "hb"})
		}
	}()
}

// run starts the goroutines that relay the agent's frames as job events
// and watch for its silence.
func (h *remoteHost) run(j *job) {
	h.heard.Store(time.Now().UnixNano())
	go h.readLoop(j)
	go h.watch(j)
}

// send queues a frame for the agent without ever blocking the event loop.
// It reports false when the queue is full (the agent stopped reading).
func (h *remoteHost) send(m *agentMsg) bool {
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

func (h *remoteHost) writeLoop() {
	w := bufio.NewWriterSize(h.in, 64<<10)
	for {
		select {
		case m := <-h.sendq:
			if writeAgentMsg(w, m) != nil {
				return
			}
			if len(h.sendq) == 0 && w.Flush() != nil {
				return
			}
			if m.Kind == "bye" {
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
func (h *remoteHost) readLoop(j *job) {
	lines := map[[2]int]*lineWriter{}
	writer := func(rank, stream int) *lineWriter {
		k := [2]int{rank, stream}
		lw := lines[k]
		if lw == nil {
			o, name := j.out, "stdout"
			if stream == 2 {
				o, name = j.errOut, "stderr"
			}
			lw = o.lineWriter(rank, name)
			lines[k] = lw
		}
		return lw
	}
	var err error
	for {
		var m *agentMsg
		m, err = readAgentMsg(h.out)
		if err != nil {
			break
		}
		h.heard.Store(time.Now().UnixNano())
		if m.Rank < 0 || m.Rank >= j.spec.NP {
			continue
		}
		switch m.Kind {
		case "out":
			// gorun's own stdout may block (a pager, a full pipe): that
			// is backpressure, not a silent agent.
			h.busy.Store(true)
			writer(m.Rank, m.Stream).Write(m.Data)
			h.busy.Store(false)
		case "started":
			var serr error
			if m.Err != "" {
				serr = errors.New(m.Err)
			}
			j.emit(event{kind: evStarted, rank: m.Rank, pid: m.PID, err: serr})
		case "ctl":
			if m.Ctl != nil {
				j.emit(event{kind: evCtl, rank: m.Rank, msg: *m.Ctl})
			}
		case "state":
			j.emit(event{kind: evState, rank: m.Rank, stopped: m.Stopped})
		case "exited":
			for s := 1; s <= 2; s++ {
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
func (h *remoteHost) watch(j *job) {
	limit := pAgentTimeout()
	t := time.NewTicker(pAgentBeat())
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		if h.busy.Load() {
			h.heard.Store(time.Now().UnixNano())
		}
		if since := time.Since(time.Unix(0, h.heard.Load())); since > limit {
			j.emit(event{kind: evAgentLost, host: h.idx, err: fmt.Errorf("its agent has not answered for %v (host frozen or cut off?)", since.Round(100*time.Millisecond))})
			return
		}
	}
}

// close ends the session: a bye for an agent that still listens, then the
// connection, waiting at most wait for the agent to finish.
func (h *remoteHost) close(wait time.Duration) {
	if h.closed.Swap(true) {
		return
	}
	if wait > 0 && h.sendq != nil {
		select {
		case h.sendq <- &agentMsg{Kind: "bye"}:
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
	} else if h.client != nil {
		h.client.Close()
	}
}
