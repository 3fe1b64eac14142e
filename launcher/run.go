package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/boot"
	"github.com/gorun/gorun/launcher/internal/hostinfo"
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
	evStarted   // a rank started (pid) or could not (err)
	evAgentLost // a host's agent ended or fell silent
	evGiveUp    // stop waiting for unresponsive hosts' ranks
	evVerdict   // a held verdict is due
	evClosed    // gorun's stdout or stderr lost its reader (EPIPE)
	evFT        // a rank's recovery message (recovery.go)
	evState     // an agent reports a rank stopped or running again
)

type event struct {
	kind evKind
	rank int
	host int // index into job.hosts (evAgentLost)
	pid  int
	card boot.Card
	err  error
	ws   syscall.WaitStatus
	msg  boot.CtlMsg
	sig  os.Signal
	ft   boot.FTMsg

	stopped bool // evState
	here    bool // evGiveUp: this host's ranks, not the remote hosts'
}

// proc is one rank's process as the launcher sees it.
type proc struct {
	rank      int
	pid       int // once its agent said started
	host      string
	hostIdx   int
	agent     *agentConn // its host's
	joined    bool
	finalized bool
	exited    bool
	stopped   bool // its agent reports it stopped
	status    int  // exit status, once exited
	abort     *boot.CtlMsg
}

func (p *proc) String() string {
	return fmt.Sprintf("rank %d (pid %d on %s)", p.rank, p.pid, p.host)
}

// hostState is one host of the job.
type hostState struct {
	name   string // as the user wrote it
	spec   Host
	hostID string // GORUN_HOSTID of its ranks
	addr   string // the address its ranks listen on
	cpus   []int  // CPUs its ranks may use (binding, default slots)
	// here: the launcher's own host, whose agent runs in the launcher's
	// process (local.go); it is never lost apart from the launcher.
	here  bool
	agent *agentConn
	lost  bool
}

// job is the state of one Run.
type job struct {
	spec    Spec
	id      string
	secret  []byte
	tmp     string
	apps    []App
	progs   []string // each app's executable, resolved
	appOf   []int    // the app of each rank
	host    string
	tty     *os.File // gorun's stdin when it is a terminal (forwardStdin)
	out     *output
	errOut  *output
	events  chan event
	quit    chan struct{}
	seed    *seed
	procs   []*proc
	cards   []boot.Card
	live    int
	started int // ranks whose agent said started
	joined  int
	ending  bool
	code    int
	timers  []*time.Timer
	hosts   []*hostState
	lay     layout
	multi   bool // some ranks run on other hosts
	held    *verdict
	recov   *recovery // Spec.Recovery: recovery.go
	sums    fileSums
	start   time.Time
	traceOn bool
	// master is MASTER_ADDR:MASTER_PORT for PyTorch programs (torchrun's
	// rendezvous variables): rank 0's host and a port free there.
	masterAddr, masterPort string
}

var pTrace = params.Int("GORUN_LAUNCH_TRACE", 0,
	"1 prints the launch's phases (connects, agents, spawns, wire-up) with times on stderr")

// trace prints a launch phase with the time since Run started.
func (j *job) trace(format string, a ...any) {
	if j.traceOn {
		j.errOut.println(fmt.Sprintf("gorun: trace %7.1f ms: ", float64(time.Since(j.start).Microseconds())/1000) + fmt.Sprintf(format, a...))
	}
}

// Run runs the job described by spec and returns the status gorun should
// exit with. The error is non-nil only when gorun itself failed before or
// while starting the ranks; the status then says how (ExitInternal,
// ExitNotFound, ExitNoExec).
func Run(spec Spec) (int, error) {
	if len(spec.Apps) == 0 {
		spec.Apps = []App{{NP: spec.NP, Program: spec.Program, Args: spec.Args}}
	} else {
		spec.NP = 0
		for i, a := range spec.Apps {
			if a.NP < 1 {
				return ExitUsage, fmt.Errorf("program %d (%s): -np must be at least 1, not %d", i+1, a.Program, a.NP)
			}
			spec.NP += a.NP
		}
		spec.Program, spec.Args = spec.Apps[0].Program, spec.Apps[0].Args
	}
	if spec.NP < 1 {
		return ExitUsage, fmt.Errorf("-np must be at least 1, not %d", spec.NP)
	}
	if spec.NP > MaxNP {
		return ExitUsage, fmt.Errorf("-np %d: a job has at most %d ranks", spec.NP, MaxNP)
	}
	if len(spec.Rankfile) > 0 {
		if spec.NP != len(spec.Rankfile) {
			return ExitUsage, fmt.Errorf("--rankfile places %d ranks, -np asks for %d", len(spec.Rankfile), spec.NP)
		}
		if len(spec.Hosts) == 0 {
			spec.Hosts = rankfileHosts(spec.Rankfile)
		}
	}
	spec.Hosts, spec.Rankfile = mergeLocalNames(spec.Hosts, spec.Rankfile)
	switch spec.MapBy {
	case "", MapBySlot, MapByNode:
	default:
		return ExitUsage, fmt.Errorf("--map-by %q: expected slot or node", spec.MapBy)
	}
	switch spec.BindTo {
	case "", BindNone, BindCore:
	default:
		return ExitUsage, fmt.Errorf("--bind-to %q: expected core or none", spec.BindTo)
	}
	if spec.OutputDir != "" {
		// Checked before any rank starts: a directory that cannot be made
		// or written lost the output the user asked to keep, in a job that
		// then ran and exited 0.
		if err := checkOutputDir(spec.OutputDir); err != nil {
			return ExitUsage, fmt.Errorf("--output-filename %s: %w", spec.OutputDir, err)
		}
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
	j := &job{spec: spec, events: make(chan event, 8*spec.NP+64), quit: make(chan struct{}), start: time.Now(), traceOn: pTrace() == 1 || spec.Verbose}
	if spec.Recovery {
		j.recov = newRecovery()
	}
	j.out = newOutput(spec.Stdout, spec.TagOutput)
	j.errOut = newOutput(spec.Stderr, spec.TagOutput)
	if spec.OutputDir != "" {
		var once sync.Once
		report := func(msg string) { once.Do(func() { go j.errOut.println(msg) }) }
		j.out.dir, j.out.errs = spec.OutputDir, report
		j.errOut.dir, j.errOut.errs = spec.OutputDir, report
	}
	j.out.onClosed = func() { j.emit(event{kind: evClosed, sig: syscall.SIGPIPE}) }
	j.errOut.onClosed = j.out.onClosed
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
	if w := startReaper(j.id, tmp); w != nil {
		defer w.Close() // after cleanup (deferred later, so run first)
	}
	defer j.cleanup()

	if err := j.resolvePrograms(); err != nil {
		var ee *errExit
		if errors.As(err, &ee) {
			return ee.code, ee.err
		}
		return ExitInternal, err
	}
	j.trace("program %s", strings.Join(j.progs, " : "))
	bind, err := j.setupHosts()
	if err != nil {
		return ExitInternal, err
	}
	j.trace("hosts ready")
	j.seed, err = startSeed(bind, j.secret, j.id, spec.NP, j.events)
	if err != nil {
		return ExitInternal, err
	}
	defer j.seed.close()
	if err := j.place(); err != nil {
		return exitOf(err), err
	}
	if err := j.placePrograms(); err != nil {
		return ExitInternal, err
	}
	j.pickMaster()

	sigs := make(chan os.Signal, 4)
	// SIGUSR1 and SIGUSR2 are passed on to every rank, as mpirun does;
	// SIGQUIT asks every rank for its stacks, then ends the job; the
	// others end the job. (Go's own SIGQUIT dump of gorun's goroutines
	// would tell a user nothing and leave the ranks to the agents.)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGCONT)
	defer signal.Stop(sigs)
	// A write to a closed stdout or stderr would kill gorun with SIGPIPE
	// (Go's default for descriptors 1 and 2) before it could stop the
	// ranks. Notified, the write returns EPIPE instead and the job ends
	// cleanly (evClosed). The channel is never read: the signal itself
	// carries nothing. Ranks start with the default disposition (a handler
	// does not survive exec), so a rank's own pipes behave as usual.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	go func() {
		for s := range sigs {
			j.emit(event{kind: evSignal, sig: s})
		}
	}()

	for _, hs := range j.hosts {
		hs.agent.run(j)
		hs.agent.send(&agentproto.Msg{Kind: agentproto.Setup, JobID: j.id, Secret: j.secret})
	}
	j.procs = make([]*proc, spec.NP)
	j.cards = make([]boot.Card, spec.NP)
	for r := range spec.NP {
		j.spawn(r)
	}
	j.trace("asked the agents for %d ranks", spec.NP)
	if spec.Timeout > 0 {
		j.after(spec.Timeout, event{kind: evTimeout})
	}
	j.loop()
	j.trace("all ranks ended")
	if j.recov != nil && !j.ending {
		return j.recoveryCode(), nil
	}
	return j.code, nil
}

// resolvePrograms finds (or builds) each app's program once and maps
// every rank to its app.
func (j *job) resolvePrograms() error {
	j.apps = j.spec.Apps
	seen := map[string]string{}
	for i, a := range j.apps {
		p, ok := seen[a.Program]
		if !ok {
			var err error
			if p, err = resolveProgram(a.Program, j.tmp, j.errOut); err != nil {
				return err
			}
			if lib := mpiLibrary(p); lib != "" && j.spec.NP > 1 {
				return fmt.Errorf("%s links %s, another MPI's library: it finds its ranks through that MPI's launcher, and under gorun each of its %d processes would run alone as rank 0 of 1; start it with that MPI's mpirun (mpirun -np %d %s)", a.Program, lib, j.spec.NP, j.spec.NP, a.Program)
			}
			seen[a.Program] = p
		}
		j.progs = append(j.progs, p)
		for range a.NP {
			j.appOf = append(j.appOf, i)
		}
	}
	return nil
}

// emit delivers an event from another goroutine; once the loop has
// ended it is dropped.
func (j *job) emit(ev event) {
	select {
	case j.events <- ev:
	case <-j.quit:
	}
}

func (j *job) after(d time.Duration, ev event) {
	j.timers = append(j.timers, time.AfterFunc(d, func() { j.emit(ev) }))
}

// cleanup leaves nothing behind: every host's agent is told to kill what
// is left of its ranks, clean up and exit (waited for, at most
// agentByeWait, unless its host was lost); then the temp dir and the job's
// shared-memory segments here go.
func (j *job) cleanup() {
	for _, t := range j.timers {
		t.Stop()
	}
	var wg sync.WaitGroup
	for _, hs := range j.hosts {
		if hs.agent == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := agentByeWait
			if hs.lost {
				wait = 0
			}
			hs.agent.close(wait)
		}()
	}
	wg.Wait()
	os.RemoveAll(j.tmp)
	RemoveSegments(j.id)
}

// agentByeWait bounds the wait for an agent to end after bye: it kills
// and reaps its ranks first (waiting a second at most: agent.reapWait).
const agentByeWait = time.Second

// RemoveSegments removes the shared-memory segments of job id from
// /dev/shm (every segment the runtime creates is named gorun-<job>-*).
func RemoveSegments(id string) { hostinfo.RemoveSegments(id) }
