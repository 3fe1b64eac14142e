package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

type evKind int

const (
	evJoined evKind = iota
	evBadJoin
	evDead
	evExited
	evCtl
	evRoster
	evTimeout
	evBootTimeout
	evSignal
	evKill
)

type event struct {
	kind  evKind
	rank  int
	card  boot.Card
	err   error
	state *os.ProcessState
	msg   boot.CtlMsg
	sig   os.Signal
}

// proc is one rank's process as the launcher sees it.
type proc struct {
	rank      int
	cmd       *exec.Cmd
	pid       int
	host      string
	joined    bool
	finalized bool
	exited    bool
	abort     *boot.CtlMsg
}

func (p *proc) String() string {
	return fmt.Sprintf("rank %d (pid %d on %s)", p.rank, p.pid, p.host)
}

// job is the state of one Run.
type job struct {
	spec    Spec
	id      string
	secret  []byte
	tmp     string
	prog    string
	host    string
	out     *output
	errOut  *output
	events  chan event
	seed    *seed
	procs   []*proc
	cards   []boot.Card
	stdio   sync.WaitGroup
	live    int
	joined  int
	ending  bool
	code    int
	timers  []*time.Timer
	oversub bool
}

// Run runs the job described by spec and returns the status gorun should
// exit with. The error is non-nil only when gorun itself failed before or
// while starting the ranks; the status then says how (ExitInternal,
// ExitNotFound, ExitNoExec).
func Run(spec Spec) (int, error) {
	if spec.NP < 1 {
		return ExitInternal, fmt.Errorf("-np must be at least 1, not %d", spec.NP)
	}
	if spec.Stdout == nil {
		spec.Stdout = os.Stdout
	}
	if spec.Stderr == nil {
		spec.Stderr = os.Stderr
	}
	if spec.BootTimeout <= 0 {
		spec.BootTimeout = DefaultBootTimeout
	}
	j := &job{spec: spec, events: make(chan event, 8*spec.NP+64)}
	j.out = &output{w: spec.Stdout, tag: spec.TagOutput}
	j.errOut = &output{w: spec.Stderr, tag: spec.TagOutput}
	j.host, _ = os.Hostname()
	idb := make([]byte, 6)
	rand.Read(idb)
	j.id = hex.EncodeToString(idb)
	j.secret = make([]byte, 32)
	if _, err := rand.Read(j.secret); err != nil {
		return ExitInternal, fmt.Errorf("job secret: %w", err)
	}
	tmp, err := os.MkdirTemp("", "gorun-"+j.id+"-")
	if err != nil {
		return ExitInternal, fmt.Errorf("temp dir: %w", err)
	}
	j.tmp = tmp
	defer j.cleanup()

	j.prog, err = resolveProgram(spec.Program, tmp)
	if err != nil {
		var ee *errExit
		if errors.As(err, &ee) {
			return ee.code, ee.err
		}
		return ExitInternal, err
	}
	j.seed, err = startSeed("127.0.0.1", j.secret, j.id, spec.NP, j.events)
	if err != nil {
		return ExitInternal, err
	}
	defer j.seed.close()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			j.events <- event{kind: evSignal, sig: s}
		}
	}()

	if n := runtime.NumCPU(); spec.NP > n {
		j.oversub = true
		j.errOut.println(fmt.Sprintf("gorun: warning: %d ranks on %d cores; waiting ranks will yield the CPU", spec.NP, n))
	}
	j.procs = make([]*proc, spec.NP)
	j.cards = make([]boot.Card, spec.NP)
	for r := range spec.NP {
		if err := j.spawn(r); err != nil {
			j.fail(ExitInternal, fmt.Sprintf("gorun: cannot start rank %d: %v", r, err))
			code := ExitInternal
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				code = ExitNotFound
			} else if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
				code = ExitNoExec
			}
			j.code = code
			break
		}
	}
	if spec.Timeout > 0 {
		j.after(spec.Timeout, event{kind: evTimeout})
	}
	j.loop()
	return j.code, nil
}

func (j *job) after(d time.Duration, ev event) {
	j.timers = append(j.timers, time.AfterFunc(d, func() { j.events <- ev }))
}

func (j *job) rankEnv(r int) []string {
	env := os.Environ()
	set := func(k string, v any) { env = append(env, k+"="+fmt.Sprint(v)) }
	n := j.spec.NP
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "RANK", boot.EnvRank} {
		set(k, r)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", boot.EnvSize} {
		set(k, n)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", boot.EnvLocalRank} {
		set(k, r)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", boot.EnvLocalSize} {
		set(k, n)
	}
	set(boot.EnvJobID, j.id)
	set(boot.EnvHostID, j.host)
	set(boot.EnvSeed, j.seed.Addr())
	set(boot.EnvBindAddr, "127.0.0.1")
	set(boot.EnvCtlFD, 3)
	set(boot.EnvBootWait, int(j.spec.BootTimeout/time.Second))
	if j.oversub {
		set("GORUN_OVERSUBSCRIBED", 1)
	}
	return append(env, j.spec.Env...)
}

// spawn starts rank r with its stdio pipes and control socket.
func (j *job) spawn(r int) error {
	p := &proc{rank: r, host: j.host}
	ctl, ctlRank, err := boot.CtlPair()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(j.prog, j.spec.Args...)
	cmd.Env = j.rankEnv(r)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{ctlRank}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdinW *os.File
	if r == 0 && j.spec.Stdin != nil {
		if f, ok := j.spec.Stdin.(*os.File); ok {
			cmd.Stdin = f
		} else {
			var inR *os.File
			inR, stdinW, err = os.Pipe()
			if err != nil {
				return err
			}
			cmd.Stdin = inR
			defer inR.Close()
		}
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	ctlRank.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		ctl.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return err
	}
	if stdinW != nil {
		go func() { io.Copy(stdinW, j.spec.Stdin); stdinW.Close() }()
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	j.procs[r] = p
	j.live++
	j.stdio.Add(2)
	go func() { defer j.stdio.Done(); j.out.forward(r, "stdout", outR); outR.Close() }()
	go func() { defer j.stdio.Done(); j.errOut.forward(r, "stderr", errR); errR.Close() }()
	boot.WriteCtl(ctl, boot.CtlMsg{Kind: boot.MsgHello, Secret: j.secret})
	ctlDone := make(chan struct{})
	go j.readCtl(r, ctl, ctlDone)
	go func() {
		cmd.Wait()
		// Deliver the rank's last control messages (Finalized, Abort)
		// before its exit; a grandchild holding the socket open must not
		// delay the verdict long.
		select {
		case <-ctlDone:
		case <-time.After(200 * time.Millisecond):
		}
		ctl.Close()
		j.events <- event{kind: evExited, rank: r, state: cmd.ProcessState}
	}()
	return nil
}

func (j *job) readCtl(r int, c net.Conn, done chan struct{}) {
	defer close(done)
	for {
		m, err := boot.ReadCtl(c)
		if err != nil {
			return
		}
		j.events <- event{kind: evCtl, rank: r, msg: m}
	}
}

// loop handles events until every rank has been reaped.
func (j *job) loop() {
	for j.live > 0 {
		ev := <-j.events
		switch ev.kind {
		case evJoined:
			j.onJoin(ev)
		case evBadJoin:
			j.fail(ExitInternal, "gorun: "+ev.err.Error())
		case evDead:
			// Locally the process's exit is the authority; memberlist's
			// verdict matters for ranks on other hosts.
		case evCtl:
			p := j.procs[ev.rank]
			switch ev.msg.Kind {
			case boot.MsgFinalized:
				p.finalized = true
			case boot.MsgAbort:
				m := ev.msg
				p.abort = &m
			}
		case evRoster:
			if ev.err != nil {
				j.fail(ExitInternal, "gorun: wire-up failed: "+ev.err.Error())
			}
		case evExited:
			j.onExit(ev)
		case evTimeout:
			j.fail(ExitTimeout, fmt.Sprintf("gorun: job exceeded --timeout %v; stopping all ranks", j.spec.Timeout))
		case evBootTimeout:
			if j.joined < j.spec.NP {
				j.fail(ExitInternal, fmt.Sprintf("gorun: %s did not call mpi.Init within %v of the first rank that did; ending the job", j.missing(func(p *proc) bool { return !p.joined }), j.spec.BootTimeout))
			}
		case evSignal:
			s := ev.sig.(syscall.Signal)
			j.fail(ExitSignal+int(s), fmt.Sprintf("gorun: received %s; stopping all ranks", unix.SignalName(s)))
		case evKill:
			for _, p := range j.procs {
				if p != nil && !p.exited {
					syscall.Kill(-p.pid, syscall.SIGKILL)
				}
			}
		}
	}
}

func (j *job) onJoin(ev event) {
	p := j.procs[ev.rank]
	if p == nil || p.joined {
		return
	}
	p.joined = true
	j.cards[ev.rank] = ev.card
	j.joined++
	if j.joined == 1 {
		j.after(j.spec.BootTimeout, event{kind: evBootTimeout})
	}
	if j.checkInitMismatch() {
		return
	}
	if j.joined == j.spec.NP && !j.ending {
		cards := append([]boot.Card(nil), j.cards...)
		go func() { j.events <- event{kind: evRoster, err: j.seed.pushRoster(cards)} }()
	}
}

// checkInitMismatch ends the job when some ranks wait in mpi.Init for a
// rank that exited without calling it.
func (j *job) checkInitMismatch() bool {
	if j.joined == 0 || j.ending {
		return false
	}
	for _, p := range j.procs {
		if p != nil && p.exited && !p.joined {
			j.fail(ExitInternal, fmt.Sprintf("gorun: %s exited without calling mpi.Init, while other ranks wait for it in mpi.Init", p))
			return true
		}
	}
	return false
}

func (j *job) onExit(ev event) {
	p := j.procs[ev.rank]
	p.exited = true
	j.live--
	if j.ending {
		return
	}
	ws, _ := ev.state.Sys().(syscall.WaitStatus)
	switch {
	case p.abort != nil:
		msg := fmt.Sprintf("gorun: %s called mpi.Abort(%d)", p, p.abort.Code)
		if p.abort.Text != "" {
			msg += ": " + p.abort.Text
		}
		j.fail(p.abort.Code, msg)
	case ws.Signaled():
		s := ws.Signal()
		j.fail(ExitSignal+int(s), fmt.Sprintf("gorun: %s was killed by signal %d (%s)", p, int(s), unix.SignalName(s)))
	case ws.ExitStatus() != 0:
		j.fail(ws.ExitStatus(), fmt.Sprintf("gorun: %s exited with status %d", p, ws.ExitStatus()))
	case p.joined && !p.finalized:
		j.fail(ExitInternal, fmt.Sprintf("gorun: %s exited with status 0 without calling mpi.Finalize", p))
	default:
		j.checkInitMismatch()
	}
}

// fail ends the job with code: one message, SIGTERM to every live rank's
// process group, SIGKILL after killGrace.
func (j *job) fail(code int, msg string) {
	if j.ending {
		return
	}
	j.ending = true
	j.code = code
	j.errOut.println(msg)
	for _, p := range j.procs {
		if p != nil && !p.exited {
			syscall.Kill(-p.pid, syscall.SIGTERM)
		}
	}
	j.after(killGrace, event{kind: evKill})
}

func (j *job) missing(pred func(*proc) bool) string {
	var rs []int
	for _, p := range j.procs {
		if p != nil && pred(p) {
			rs = append(rs, p.rank)
		}
	}
	sort.Ints(rs)
	var s []string
	for _, r := range rs {
		s = append(s, strconv.Itoa(r))
	}
	if len(s) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// cleanup leaves nothing behind: stragglers in the ranks' process groups,
// stdio forwarders, the temp dir and the job's shared-memory segments.
func (j *job) cleanup() {
	for _, t := range j.timers {
		t.Stop()
	}
	for _, p := range j.procs {
		if p != nil {
			syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	}
	done := make(chan struct{})
	go func() { j.stdio.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	os.RemoveAll(j.tmp)
	RemoveSegments(j.id)
}

// RemoveSegments removes the shared-memory segments of job id from
// /dev/shm (every segment the runtime creates is named gorun-<job>-*).
func RemoveSegments(id string) {
	m, _ := filepath.Glob(filepath.Join("/dev/shm", "gorun-"+id+"-*"))
	for _, f := range m {
		os.Remove(f)
	}
}
