package launcher

import (
	"bytes"
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorun/gorun/internal/params"
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
	evStarted   // a remote rank started (pid) or could not (err)
	evAgentLost // a remote host's agent ended or fell silent
	evGiveUp    // stop waiting for unresponsive hosts' ranks
	evVerdict   // a held verdict is due
	evClosed    // gorun's stdout or stderr lost its reader (EPIPE)
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
}

// proc is one rank's process as the launcher sees it.
type proc struct {
	rank      int
	cmd       *exec.Cmd // local ranks only
	pid       int
	host      string
	hostIdx   int
	remote    *remoteHost // nil for ranks on the launcher's host
	joined    bool
	finalized bool
	exited    bool
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
	remote *remoteHost
	lost   bool
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
	prog    string   // progs[0]
	host    string
	out     *output
	errOut  *output
	events  chan event
	quit    chan struct{}
	seed    *seed
	procs   []*proc
	cards   []boot.Card
	stdio   sync.WaitGroup
	live    int
	joined  int
	ending  bool
	code    int
	timers  []*time.Timer
	hosts   []*hostState
	lay     layout
	multi   bool // some ranks run on other hosts
	held    *verdict
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

// verdict is a failure message with the status it gives gorun.
type verdict struct {
	code int
	msg  string
}

// verdictHold is how long, in a multi-host job, a rank's non-zero exit
// waits before it becomes the job's verdict: when a host dies, the ranks
// elsewhere often fail an operation with it and exit first; the line
// should name the rank that died, not one that noticed.
const verdictHold = 300 * time.Millisecond

// remoteGiveUp is how long after SIGKILL the launcher waits for remote
// hosts to report their ranks' exits before it stops waiting (a frozen
// host never will; its agent kills the ranks once it runs again and finds
// the launcher gone).
const remoteGiveUp = 300 * time.Millisecond

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
				return ExitInternal, fmt.Errorf("program %d (%s): -np must be at least 1, not %d", i+1, a.Program, a.NP)
			}
			spec.NP += a.NP
		}
		spec.Program, spec.Args = spec.Apps[0].Program, spec.Apps[0].Args
	}
	if spec.NP < 1 {
		return ExitInternal, fmt.Errorf("-np must be at least 1, not %d", spec.NP)
	}
	if len(spec.Rankfile) > 0 {
		if spec.NP != len(spec.Rankfile) {
			return ExitInternal, fmt.Errorf("--rankfile places %d ranks, -np asks for %d", len(spec.Rankfile), spec.NP)
		}
		if len(spec.Hosts) == 0 {
			spec.Hosts = rankfileHosts(spec.Rankfile)
		}
	}
	switch spec.MapBy {
	case "", MapBySlot, MapByNode:
	default:
		return ExitInternal, fmt.Errorf("--map-by %q: expected slot or node", spec.MapBy)
	}
	switch spec.BindTo {
	case "", BindNone, BindCore:
	default:
		return ExitInternal, fmt.Errorf("--bind-to %q: expected core or none", spec.BindTo)
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
		return ExitInternal, err
	}
	j.pickMaster()

	sigs := make(chan os.Signal, 4)
	// SIGUSR1 and SIGUSR2 are passed on to every rank, as mpirun does;
	// the others end the job.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
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
		if hs.remote != nil {
			hs.remote.run(j)
			hs.remote.send(&agentMsg{Kind: "setup", JobID: j.id, Secret: j.secret})
		}
	}
	j.procs = make([]*proc, spec.NP)
	j.cards = make([]boot.Card, spec.NP)
	for r := range spec.NP {
		hs := j.hosts[j.lay.ranks[r].host]
		if hs.remote != nil {
			j.spawnRemote(r, hs)
			continue
		}
		if err := j.spawn(r); err != nil {
			j.fail(ExitInternal, fmt.Sprintf("gorun: cannot start rank %d: %v", r, err))
			j.code = spawnErrCode(err)
			break
		}
	}
	j.trace("spawned %d ranks", spec.NP)
	if spec.Timeout > 0 {
		j.after(spec.Timeout, event{kind: evTimeout})
	}
	j.loop()
	j.trace("all ranks ended")
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
			seen[a.Program] = p
		}
		if lib := mpiLibrary(p); lib != "" && j.spec.NP > 1 {
			return fmt.Errorf("%s links %s, another MPI's library: it finds its ranks through that MPI's launcher, and under gorun each of its %d processes would run alone as rank 0 of 1; start it with that MPI's mpirun (mpirun -np %d %s)", a.Program, lib, j.spec.NP, j.spec.NP, a.Program)
		}
		j.progs = append(j.progs, p)
		for range a.NP {
			j.appOf = append(j.appOf, i)
		}
	}
	j.prog = j.progs[0]
	return nil
}

// spawnErrCode maps a failure to start a program to gorun's status.
func spawnErrCode(err error) int {
	msg := err.Error()
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist), strings.Contains(msg, "no such file"):
		return ExitNotFound
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC), strings.Contains(msg, "permission denied"), strings.Contains(msg, "exec format error"):
		return ExitNoExec
	}
	return ExitInternal
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

// setupHosts builds the host list, connects to the remote hosts in
// parallel (starting their agents) and returns the address the launcher's
// seed binds to.
func (j *job) setupHosts() (string, error) {
	hosts := j.spec.Hosts
	if len(hosts) == 0 {
		hosts = []Host{{Name: "localhost"}}
	}
	var remote []int
	for i, h := range hosts {
		hs := &hostState{name: h.Name, spec: h}
		j.hosts = append(j.hosts, hs)
		if !isLocalHost(h.Name) {
			remote = append(remote, i)
		}
	}
	j.multi = len(remote) > 0
	if j.multi {
		for _, p := range j.progs[1:] {
			if p != j.prog {
				// Not done: the agents copy and check one program per
				// host (agentConfig.prog); several would need the
				// hello's ProgOK per program.
				return "", fmt.Errorf("several programs (':') across hosts are not supported yet: run them on this host, or build one program that branches on its rank")
			}
		}
	}
	bind := "127.0.0.1"
	if j.spec.IfInclude != "" {
		ip, err := matchIfInclude(j.spec.IfInclude, localAddrs())
		if err != nil {
			return "", fmt.Errorf("on this host (%s): %w", j.host, err)
		}
		bind = ip.String()
	}
	if j.multi {
		if err := j.connectAll(remote); err != nil {
			return "", err
		}
		if j.spec.IfInclude == "" {
			// The address this host reached the first one from routes back.
			if ip := j.hosts[remote[0]].remote.local; ip != nil && !ip.IsUnspecified() {
				bind = ip.String()
			} else {
				bind = defaultAddr("", localAddrs()).String()
			}
		}
	}
	cpus := allowedCPUs()
	for _, hs := range j.hosts {
		if hs.remote == nil {
			hs.hostID, hs.addr, hs.cpus = j.host, bind, cpus
			continue
		}
		hello := hs.remote.hello
		hs.hostID, hs.addr, hs.cpus = hello.Host, hello.Addr, hello.CPUs
		if hs.hostID == "" {
			hs.hostID = hs.name
		}
		if len(hs.cpus) == 0 {
			for c := range max(hello.NCPU, 1) {
				hs.cpus = append(hs.cpus, c)
			}
		}
	}
	return bind, nil
}

// connectAll connects to the remote hosts in parallel; every host that
// fails is named in the error.
func (j *job) connectAll(idx []int) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find gorun's own binary: %w", err)
	}
	cfg := &agentConfig{gorun: self, prog: j.prog, ifInclude: j.spec.IfInclude, sums: &j.sums, stderr: j.errOut, cpus: j.spec.SlurmCPUs}
	switch j.spec.Agents {
	case "", AgentsSSH:
		if cfg.ssh, err = loadSSHSettings(j.spec.SSHConfig, j.spec.ConnectTimeout); err != nil {
			return err
		}
	case AgentsSrun:
		if cfg.srun, err = exec.LookPath("srun"); err != nil {
			return fmt.Errorf("agents by srun: %w", err)
		}
	default:
		return fmt.Errorf("agents started by %q: expected ssh or srun", j.spec.Agents)
	}
	errs := make([]error, len(j.hosts))
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := j.hosts[i].name
			if p := j.hosts[i].spec.Port; p != "" {
				name = net.JoinHostPort(name, p) // [v6]:port where it has colons
			}
			var h *remoteHost
			var err error
			if cfg.srun != "" {
				// Starting a step takes longer than an ssh handshake.
				h, err = connectSrun(cfg, name, i, cfg.cpus[name], 3*cmpDur(j.spec.ConnectTimeout, DefaultConnectTimeout), j.trace)
			} else {
				h, err = connectHost(cfg, name, i, j.trace)
			}
			if err != nil {
				errs[i] = err
				return
			}
			j.hosts[i].remote = h
		}()
	}
	wg.Wait()
	var msgs []string
	for i, err := range errs {
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("%s: %v", j.hosts[i].name, err))
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("cannot start on %d of %d hosts: %s", len(msgs), len(idx), strings.Join(msgs, "; "))
	}
	return nil
}

// place maps the ranks onto the hosts, warns about oversubscription and
// reports bindings.
func (j *job) place() error {
	n := len(j.hosts)
	names := make([]string, n)
	slots := make([]int, n)
	maxs := make([]int, n)
	for i, hs := range j.hosts {
		names[i] = hs.name
		slots[i] = hs.spec.Slots
		if slots[i] == 0 {
			slots[i] = len(hs.cpus)
		}
		maxs[i] = hs.spec.MaxSlots
	}
	var lay layout
	var err error
	if len(j.spec.Rankfile) > 0 {
		lay, err = rankLayout(j.spec.Rankfile, names)
		for i := range n {
			lay.slots += slots[i]
			lay.oversub = lay.oversub || lay.localSize[i] > slots[i]
		}
	} else {
		lay, err = plan(j.spec.NP, names, slots, maxs, j.spec.MapBy, j.spec.NoOversubscribe)
	}
	if err != nil {
		return err
	}
	j.lay = lay
	if lay.oversub {
		if len(j.spec.Hosts) == 0 {
			j.errOut.println(fmt.Sprintf("gorun: warning: %d ranks on %d cores; waiting ranks will yield the CPU", j.spec.NP, lay.slots))
		} else {
			j.errOut.println(fmt.Sprintf("gorun: warning: %d ranks on %d slots (%s); hosts are oversubscribed", j.spec.NP, lay.slots, describeSlots(names, slots)))
		}
	}
	for _, s := range j.spec.Rankfile {
		if cpus := j.hosts[lay.ranks[s.Rank].host].cpus; s.CPU >= 0 && !slices.Contains(cpus, s.CPU) {
			return fmt.Errorf("rankfile: rank %d on %s: slot=%d is not one of its usable CPUs (%v)", s.Rank, s.Host, s.CPU, cpus)
		}
	}
	if j.spec.DisplayMap {
		j.displayMap(slots)
	}
	if j.spec.ReportBindings {
		for r, pl := range lay.ranks {
			hs := j.hosts[pl.host]
			if cpu := j.cpuOf(r); cpu >= 0 {
				j.errOut.println(fmt.Sprintf("gorun: rank %d on %s bound to CPU %d %s", r, hs.name, cpu, bindMask(hs.cpus, cpu)))
			} else {
				j.errOut.println(fmt.Sprintf("gorun: rank %d on %s not bound", r, hs.name))
			}
		}
	}
	return nil
}

// displayMap prints, as --display-map, each host with how its entry was
// read (host:N is slots, never a port) and the ranks placed on it, with
// their program in an MPMD job.
func (j *job) displayMap(slots []int) {
	how := "--map-by " + cmpOr(j.spec.MapBy, MapBySlot)
	if len(j.spec.Rankfile) > 0 {
		how = "--rankfile"
	}
	j.errOut.println(fmt.Sprintf("gorun: map of %d ranks on %d hosts (%s):", j.spec.NP, len(j.hosts), how))
	for i, hs := range j.hosts {
		var ranks []string
		for r, pl := range j.lay.ranks {
			if pl.host != i {
				continue
			}
			s := strconv.Itoa(r)
			if len(j.apps) > 1 {
				s += "=" + filepath.Base(j.progs[j.appOf[r]])
			}
			ranks = append(ranks, s)
		}
		entry := hs.spec.Entry
		if entry == "" {
			entry = "this host (no -H or hostfile)"
		}
		where := "here, no ssh"
		if hs.remote != nil {
			where = "over ssh"
		}
		j.errOut.println(fmt.Sprintf("gorun:   %s: %d slots, %s; from %s; ranks %s", hs.name, slots[i], where, entry, strings.Join(ranks, " ")))
	}
}

// cmpDur is a, or b when a is zero.
func cmpDur(a, b time.Duration) time.Duration {
	if a == 0 {
		return b
	}
	return a
}

// cmpOr is a, or b when a is empty.
func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// pickMaster chooses MASTER_ADDR and MASTER_PORT, as torchrun sets them
// for torch.distributed's env:// rendezvous: rank 0's address, and a port
// that was free on it a moment ago (probed here when rank 0 runs on this
// host; on another host, a port free on this one, which a busy remote host
// may have taken: set MASTER_PORT with -x then). Values in gorun's
// environment or given with -x win.
func (j *job) pickMaster() {
	hs := j.hosts[j.lay.ranks[0].host]
	j.masterAddr = hs.addr
	probe := hs.addr
	if hs.remote != nil {
		probe = ""
	}
	if l, err := net.Listen("tcp", net.JoinHostPort(probe, "0")); err == nil {
		_, j.masterPort, _ = net.SplitHostPort(l.Addr().String())
		l.Close()
	}
	j.trace("MASTER_ADDR=%s MASTER_PORT=%s", j.masterAddr, j.masterPort)
}

// cpuOf is the CPU rank r is bound to, or -1.
func (j *job) cpuOf(r int) int {
	pl := j.lay.ranks[r]
	cpus := j.hosts[pl.host].cpus
	if len(j.spec.Rankfile) > 0 && j.spec.Rankfile[r].CPU >= 0 {
		return j.spec.Rankfile[r].CPU // checked against the host's CPUs in place
	}
	if len(cpus) == 0 {
		return -1
	}
	switch j.spec.BindTo {
	case BindCore:
	case "":
		// The default, as Open MPI's: a core each while the host's ranks
		// fit its cores. Unbound ranks at np = cores were 10-30x slower
		// in small collectives on the lent 16-core host (two spinning
		// ranks ended up sharing a core; coll/MEASUREMENTS.md).
		if j.lay.localSize[pl.host] > len(cpus) {
			return -1
		}
	default:
		return -1
	}
	return cpus[pl.local%len(cpus)]
}

// rankEnv is rank r's environment: base, then the MPI and gorun
// variables, then the user's -x variables.
func (j *job) rankEnv(r int, base []string) []string {
	env := base
	set := func(k string, v any) { env = append(env, k+"="+fmt.Sprint(v)) }
	n := j.spec.NP
	pl := j.lay.ranks[r]
	hs := j.hosts[pl.host]
	ln := j.lay.localSize[pl.host]
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "RANK", boot.EnvRank} {
		set(k, r)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", boot.EnvSize} {
		set(k, n)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", boot.EnvLocalRank} {
		set(k, pl.local)
	}
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", boot.EnvLocalSize} {
		set(k, ln)
	}
	for k, v := range map[string]string{"MASTER_ADDR": j.masterAddr, "MASTER_PORT": j.masterPort} {
		if u, ok := os.LookupEnv(k); ok {
			v = u // gorun's own environment's, also for remote ranks
		}
		if v != "" && !hasVar(env, k) {
			set(k, v)
		}
	}
	set(boot.EnvJobID, j.id)
	set(boot.EnvHostID, hs.hostID)
	set(boot.EnvSeed, j.seed.Addr())
	set(boot.EnvBindAddr, hs.addr)
	set(boot.EnvCtlFD, 3)
	set(boot.EnvBootWait, int(j.spec.BootTimeout/time.Second))
	if ln > len(hs.cpus) {
		set("GORUN_OVERSUBSCRIBED", 1)
	}
	if !hasVar(env, "GOMAXPROCS") && !hasVar(j.spec.Env, "GOMAXPROCS") {
		// A Go rank otherwise runs as many Ps (and a quarter as many GC
		// workers) as the host has cores: 32 ranks on 64 cores then fight
		// over the CPUs while they wait, and small collectives took 2-10x
		// longer from run to run. Share the host's cores among its ranks.
		set("GOMAXPROCS", max(2, len(hs.cpus)/max(ln, 1)))
	}
	env = append(env, j.spec.Env...)
	return append(env, j.apps[j.appOf[r]].Env...)
}

// hasVar reports whether env sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// forwardedEnv is what a remote rank inherits from gorun's environment:
// the runtime's tunables (GORUN_*), as Open MPI forwards OMPI_MCA_*.
// Everything else comes from the remote host, plus -x.
func forwardedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GORUN_") {
			env = append(env, kv)
		}
	}
	return env
}

// spawnRemote asks rank r's host agent to start it; the agent answers
// with a started event.
func (j *job) spawnRemote(r int, hs *hostState) {
	h := hs.remote
	p := &proc{rank: r, host: hs.name, hostIdx: h.idx, remote: h}
	j.procs[r] = p
	j.live++
	dir, _ := os.Getwd()
	stdin := r == 0 && j.spec.Stdin != nil
	m := &agentMsg{Kind: "spawn", Rank: r, Prog: h.prog, Args: j.apps[j.appOf[r]].Args, Env: j.rankEnv(r, forwardedEnv()), Dir: dir, CPU: j.cpuOf(r) + 1, Stdin: stdin}
	if !h.send(m) {
		j.emit(event{kind: evAgentLost, host: h.idx, err: errors.New("its agent stopped reading")})
		return
	}
	if stdin {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := j.spec.Stdin.Read(buf)
				if n > 0 {
					select {
					case h.sendq <- &agentMsg{Kind: "stdin", Data: append([]byte(nil), buf[:n]...)}:
					case <-h.done:
						return
					case <-j.quit:
						return
					}
				}
				if err != nil {
					select {
					case h.sendq <- &agentMsg{Kind: "stdin"}:
					case <-h.done:
					case <-j.quit:
					}
					return
				}
			}
		}()
	}
}

// spawn starts local rank r with its stdio pipes and control socket.
func (j *job) spawn(r int) error {
	p := &proc{rank: r, host: j.host, hostIdx: j.lay.ranks[r].host}
	if len(j.spec.Hosts) > 0 {
		p.host = j.hosts[p.hostIdx].name
	}
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
	app := j.apps[j.appOf[r]]
	cmd := exec.Command(j.progs[j.appOf[r]], app.Args...)
	cmd.Env = j.rankEnv(r, os.Environ())
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
	err = startBound(cmd, j.cpuOf(r))
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
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		j.emit(event{kind: evExited, rank: r, ws: ws})
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
		j.emit(event{kind: evCtl, rank: r, msg: m})
	}
}

// loop handles events until every rank has been reaped.
func (j *job) loop() {
	defer close(j.quit)
	defer func() {
		// Every rank ended before a held verdict was due (all of them
		// failed at once): it is still the job's verdict.
		if j.held != nil && !j.ending {
			j.fail(j.held.code, j.held.msg)
		}
	}()
	for j.live > 0 {
		ev := <-j.events
		switch ev.kind {
		case evJoined:
			j.onJoin(ev)
		case evBadJoin:
			j.fail(ExitInternal, "gorun: "+ev.err.Error())
		case evDead:
			j.onDead(ev)
		case evCtl:
			p := j.procs[ev.rank]
			if p == nil {
				break
			}
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
		case evStarted:
			j.onStarted(ev)
		case evAgentLost:
			j.onAgentLost(ev)
		case evVerdict:
			j.onVerdict()
		case evTimeout:
			if j.spec.StackTraces && !j.ending {
				j.dumpStacks()
				break
			}
			j.fail(ExitTimeout, fmt.Sprintf("gorun: job exceeded --timeout %v; stopping all ranks", j.spec.Timeout))
		case evBootTimeout:
			if j.joined < j.spec.NP {
				j.fail(ExitInternal, fmt.Sprintf("gorun: %s did not call mpi.Init within %v of the first rank that did; ending the job", j.missing(func(p *proc) bool { return !p.joined }), j.spec.BootTimeout))
			}
		case evSignal:
			s := ev.sig.(syscall.Signal)
			if s == syscall.SIGUSR1 || s == syscall.SIGUSR2 {
				if !j.ending {
					j.signalAll(s)
				}
				break
			}
			j.fail(ExitSignal+int(s), fmt.Sprintf("gorun: received %s; stopping all ranks", unix.SignalName(s)))
		case evClosed:
			// `gorun ... | head`: the reader is gone. End the job as a
			// pipeline would end its writer (status 141, 128+SIGPIPE),
			// but cleanly: ranks stopped, nothing left behind.
			j.fail(ExitSignal+int(syscall.SIGPIPE), "gorun: the output's reader went away (broken pipe); stopping all ranks")
		case evKill:
			j.signalAll(syscall.SIGKILL)
			if j.multi {
				j.after(remoteGiveUp, event{kind: evGiveUp})
			}
		case evGiveUp:
			for _, hs := range j.hosts {
				if hs.remote != nil && j.liveOn(hs) > 0 {
					j.loseHost(hs)
				}
			}
		}
	}
}

// onDead handles the failure detector's verdict on a rank. For a rank on
// this host the process's exit is the authority; for one on another host
// it may be the only news (a frozen host, a cut cable).
func (j *job) onDead(ev event) {
	if ev.rank < 0 || ev.rank >= len(j.procs) {
		return
	}
	p := j.procs[ev.rank]
	if p == nil || p.exited || p.finalized || j.ending {
		return
	}
	if p.remote == nil {
		// Here the process is the authority: a live one that missed its
		// probes is only busy (2 cores at load 8 did that), but one the
		// kernel has stopped (SIGSTOP, a debugger) will never answer.
		if st := procState(p.pid); st == 'T' || st == 't' {
			j.fail(ExitInternal, fmt.Sprintf("gorun: %s is stopped (process state %c: SIGSTOP or a debugger) and stopped answering the failure detector; ending the job", p, st))
		}
		return
	}
	j.fail(ExitInternal, fmt.Sprintf("gorun: %s stopped responding: the failure detector declared it dead (is %s frozen or cut off?)", p, p.host))
	// Its host will not report its ranks' ends: stop waiting for them now.
	// Its agent kills them when it finds the connection closed, or the
	// launcher silent.
	j.loseHost(j.hosts[p.hostIdx])
}

// onVerdict gives a held verdict, unless by now a host or a rank is
// known to have failed: an agent that stopped answering (its host frozen
// or cut off) or a rank that the failure detector suspects.
func (j *job) onVerdict() {
	if j.held == nil || j.ending {
		return
	}
	stale := 3 * pAgentBeat()
	for _, hs := range j.hosts {
		if hs.remote == nil || hs.lost {
			continue
		}
		var ranks []*proc
		for _, p := range j.procs {
			if p != nil && p.remote == hs.remote && !p.exited {
				ranks = append(ranks, p)
			}
		}
		if since := time.Since(time.Unix(0, hs.remote.heard.Load())); since > stale && len(ranks) > 0 {
			j.fail(ExitInternal, fmt.Sprintf("gorun: lost host %s with %s: its agent has not answered for %v (host frozen or cut off?)", hs.name, describeProcs(ranks), since.Round(10*time.Millisecond)))
			j.loseHost(hs)
			return
		}
	}
	for _, r := range j.seed.suspects() {
		if p := j.procs[r]; p != nil && p.remote != nil && !p.exited && !p.finalized {
			j.fail(ExitInternal, fmt.Sprintf("gorun: %s stopped responding: the failure detector suspects it (is %s frozen or cut off?)", p, p.host))
			j.loseHost(j.hosts[p.hostIdx])
			return
		}
	}
	j.fail(j.held.code, j.held.msg)
}

func (j *job) onStarted(ev event) {
	p := j.procs[ev.rank]
	if p == nil || p.exited {
		return
	}
	p.pid = ev.pid
	if ev.err != nil {
		p.exited = true
		j.live--
		j.fail(spawnErrCode(ev.err), fmt.Sprintf("gorun: cannot start rank %d on %s: %v", p.rank, p.host, ev.err))
	}
}

// onAgentLost ends the job when a host's agent is gone while its ranks
// were still running.
func (j *job) onAgentLost(ev event) {
	hs := j.hosts[ev.host]
	if hs.lost {
		return
	}
	var ranks []*proc
	for _, p := range j.procs {
		if p != nil && p.hostIdx == ev.host && p.remote != nil && !p.exited {
			ranks = append(ranks, p)
		}
	}
	j.loseHost(hs)
	if len(ranks) == 0 || j.ending {
		return
	}
	j.fail(ExitInternal, fmt.Sprintf("gorun: lost host %s with %s: %v", hs.name, describeProcs(ranks), ev.err))
}

// loseHost stops waiting for hs: its ranks count as gone, its connection
// is closed (the agent, if it ever runs again, kills them).
func (j *job) loseHost(hs *hostState) {
	if hs.remote == nil {
		return
	}
	hs.lost = true
	for _, p := range j.procs {
		if p != nil && p.remote == hs.remote && !p.exited {
			p.exited = true
			j.live--
		}
	}
	go hs.remote.close(0)
}

func (j *job) liveOn(hs *hostState) int {
	n := 0
	for _, p := range j.procs {
		if p != nil && p.remote == hs.remote && !p.exited {
			n++
		}
	}
	return n
}

func describeProcs(ps []*proc) string {
	var s []string
	for _, p := range ps {
		if p.pid > 0 {
			s = append(s, fmt.Sprintf("rank %d (pid %d)", p.rank, p.pid))
		} else {
			s = append(s, fmt.Sprintf("rank %d", p.rank))
		}
	}
	return strings.Join(s, ", ")
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
		j.trace("all %d ranks joined; pushing the roster", j.joined)
		cards := append([]boot.Card(nil), j.cards...)
		go func() { j.emit(event{kind: evRoster, err: j.seed.pushRoster(cards)}) }()
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
	if p == nil || p.exited {
		return // a lost host's rank, already counted
	}
	p.exited = true
	j.live--
	if j.ending {
		return
	}
	ws := ev.ws
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
		msg := fmt.Sprintf("gorun: %s exited with status %d", p, ws.ExitStatus())
		if j.multi {
			// Perhaps it only noticed another rank's death: let that
			// news arrive first.
			if j.held == nil {
				j.held = &verdict{ws.ExitStatus(), msg}
				j.after(verdictHold, event{kind: evVerdict})
			}
			return
		}
		j.fail(ws.ExitStatus(), msg)
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
	j.held = nil
	j.code = code
	j.errOut.println(msg)
	j.signalAll(syscall.SIGTERM)
	j.after(killGrace, event{kind: evKill})
}

// stackGrace is how long ranks get to print their stacks after SIGQUIT
// before SIGKILL: a Go rank writes every goroutine's stack and exits in
// milliseconds; the rest is for the output to reach gorun from other
// hosts.
const stackGrace = 2 * time.Second

// dumpStacks ends a job whose --timeout expired, with --get-stack-traces:
// SIGQUIT to every rank first. A Go program answers SIGQUIT by printing
// every goroutine's stack on stderr and exiting with status 2; that
// output is forwarded as usual. Any other program gets SIGQUIT's default
// action (it ends, with a core file where core dumps are enabled); attach
// a debugger for its stacks. SIGKILL follows after stackGrace.
func (j *job) dumpStacks() {
	j.ending = true
	j.held = nil
	j.code = ExitTimeout
	j.errOut.println(fmt.Sprintf("gorun: job exceeded --timeout %v; asking every rank for its stacks (SIGQUIT), then stopping all ranks", j.spec.Timeout))
	j.signalAll(syscall.SIGQUIT)
	j.after(stackGrace, event{kind: evKill})
}

// signalAll sends sig to every live rank's process group: directly here,
// through the agents elsewhere.
func (j *job) signalAll(sig syscall.Signal) {
	for _, p := range j.procs {
		if p != nil && !p.exited && p.remote == nil {
			syscall.Kill(-p.pid, sig)
		}
	}
	for _, hs := range j.hosts {
		if hs.remote != nil && !hs.lost && j.liveOn(hs) > 0 {
			hs.remote.send(&agentMsg{Kind: "signal", Sig: int(sig)})
		}
	}
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
// the remote agents (told to clean up and exit), stdio forwarders, the temp
// dir and the job's shared-memory segments.
func (j *job) cleanup() {
	for _, t := range j.timers {
		t.Stop()
	}
	for _, p := range j.procs {
		if p != nil && p.remote == nil {
			syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	}
	var wg sync.WaitGroup
	for _, hs := range j.hosts {
		if hs.remote == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := time.Second
			if hs.lost {
				wait = 0
			}
			hs.remote.close(wait)
		}()
	}
	wg.Wait()
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

// procState is the state letter of process pid (/proc/<pid>/stat: R, S,
// D, T stopped, t traced, Z...), or 0 when it cannot be read.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold anything: the state
	// follows the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}
