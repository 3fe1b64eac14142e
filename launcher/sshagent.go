package launcher

// The ssh backend: an agent is the gorun binary (copied to the host first
// when it is missing there) in one ssh session, its stdin and stdout the
// protocol's stream.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher/agent"
	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/internal/hostinfo"
	"golang.org/x/crypto/ssh"
)

var pSkipRC = params.Int("GORUN_SSH_SKIP_RC", 1,
	"1 asks the remote shell to skip ~/.bashrc (SHLVL=1, where sshd accepts it) when starting agents: rc files cost 100+ ms; 0 leaves it alone")

// sshProc is an agent in an ssh session (sess: nil until it has started).
type sshProc struct {
	client *ssh.Client
	sess   *ssh.Session
}

func (p *sshProc) exitReason(d time.Duration, streamErr error) string {
	if p.sess == nil {
		return "the ssh connection was lost (" + streamErr.Error() + ")"
	}
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

// connectHost connects to name, makes sure gorun and the programs are
// there (copying them, verified by checksum, when they are not), starts
// the agent and reads its hello.
func connectHost(cfg *agentConfig, name string, idx int, trace func(string, ...any)) (*agentConn, error) {
	client, t, local, err := cfg.ssh.dial(name)
	if err != nil {
		return nil, err
	}
	trace("%s: ssh connected", name)
	h := newAgentConn(name, idx)
	h.from = local
	p := &sshProc{client: client}
	h.proc = p
	fail := func(err error) (*agentConn, error) {
		h.close(0)
		return nil, err
	}
	var quoted []string
	for _, a := range agentArgv(cfg) {
		quoted = append(quoted, shellQuote(a))
	}
	agentArgs := strings.Join(quoted, " ")
	// Fast path: the same gorun (size and mtime) at the same path, as on a
	// shared file system.
	q := shellQuote(cfg.gorun)
	script := fmt.Sprintf(`if [ "$(stat -c %%s:%%Y %s 2>/dev/null)" = %s ]; then exec %s %s; fi; exit %d`, q, shellQuote(hostinfo.FileID(cfg.gorun)), q, agentArgs, agentExitMissing)
	err = h.startAgent(cfg, p, script, t.timeout)
	if errors.Is(err, errAgentMissing) {
		var path string
		if path, err = ensureFile(cfg, client, cfg.gorun, "gorun", t.timeout); err != nil {
			return fail(fmt.Errorf("copy gorun to the host: %w", err))
		}
		err = h.startAgent(cfg, p, "exec "+shellQuote(path)+" "+agentArgs, t.timeout)
	}
	if err != nil {
		return fail(err)
	}
	trace("%s: agent said hello", name)
	h.startBeats()
	if h.hello.Err != "" {
		return fail(errors.New(h.hello.Err))
	}
	h.copyProg = func(prog string) (string, error) {
		return ensureFile(cfg, client, prog, filepath.Base(prog), t.timeout)
	}
	return h, nil
}

var errAgentMissing = errors.New("gorun is not on the host")

// agentArgv is the agent's command line after gorun's path.
func agentArgv(cfg *agentConfig) []string {
	a := []string{agent.Flag, "-version", fmt.Sprint(agentproto.Version), "-beat", agentproto.Beat().String(), "-timeout", agentproto.Timeout().String()}
	for i, p := range cfg.progs {
		a = append(a, "-prog", p, "-prog-id", cfg.progIDs[i])
	}
	if cfg.ifInclude != "" {
		a = append(a, "-if-include", cfg.ifInclude)
	}
	return a
}

// startAgent runs script in a new session of p's connection and waits for
// the agent's hello.
func (h *agentConn) startAgent(cfg *agentConfig, p *sshProc, script string, timeout time.Duration) error {
	s, err := p.client.NewSession()
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
	s.Stderr = h.agentLog(cfg.stderr)
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
	if err := checkHello(m, len(cfg.progs)); err != nil {
		s.Close()
		return err
	}
	p.sess, h.in, h.out, h.hello = s, in, br, m
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
