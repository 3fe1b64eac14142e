// Command gorun launches an MPI job of Go programs (or any program):
//
//	gorun -np 4 ./examples/hello
//
// Run `gorun --help` for the flags and exit statuses.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	_ "github.com/gorun/gorun/btl/all" // the transports' tunables appear in --help-params, as do these:
	_ "github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher"
	"github.com/gorun/gorun/launcher/agent"
	_ "github.com/gorun/gorun/mpi" // GORUN_RMA_*
	_ "github.com/gorun/gorun/p2p"
)

const usage = `usage: gorun [flags] PROGRAM [ARGS...] [: [-np N] [-x VAR] PROGRAM [ARGS...]]...

PROGRAM is a Go package directory (built once with 'go build') or any
executable, found like a shell would (on PATH, then, as mpirun does, in
the current directory for a bare name). Several programs separated by ':'
(MPMD, as mpirun) share one MPI_COMM_WORLD, ranks numbered in order and
placed in that order over the slots of every host; only -np and -x may be
given per program.

Flags:
  -np N, -n N         number of ranks (default: every slot of -H or --hostfile, as
                      mpirun; the allocation's tasks or the rankfile's ranks; else 1)
  --tag-output        prefix every output line with [1,rank]<stdout>: (or <stderr>),
                      Open MPI's tag
  --output-filename DIR  also write each rank's output to DIR/1/rank.N/stdout
                      and .../stderr (Open MPI 4.1's layout)
  --timeout SECONDS   end the job after SECONDS (exit status 124); MPIEXEC_TIMEOUT in
                      the environment sets it too, as for mpirun
  --get-stack-traces  with --timeout: first ask every rank for its stacks (SIGQUIT:
                      a Go program prints every goroutine's stack; another program
                      just ends, with a core file where enabled)
  --boot-timeout SEC  how long ranks in mpi.Init wait for the others (default 60)
  --enable-recovery   a failed rank does not end the job: the others see ErrProcFailed and
                      may go on (mpi's Revoke, Shrink, Agree: ULFM); also --with-ft ulfm
  -x VAR[=VALUE]      pass VAR (from gorun's environment, or set to VALUE) to the ranks
                      (remote ranks also get every GORUN_* variable of gorun's environment)
  --mca NAME VALUE    set gorun's tunable NAME (GORUN_<NAME>, or its lower-case short
                      form) for gorun and the ranks; Open MPI's btl and
                      btl_tcp_if_include/oob_tcp_if_include are translated, with a
                      note; any other Open MPI parameter is refused by name
  --help-params       list the GORUN_* tunables with their defaults
  --topo              print this host's GPUs, NICs and NUMA placement like
                      'nvidia-smi topo -m', and the path the runtime uses per GPU pair
  --probe             with --topo: also measure each GPU pair's copy bandwidth
  --verbose, -v       show the launch's steps (connects, agents, spawns, wire-up) with
                      their times on stderr (as GORUN_LAUNCH_TRACE=1)
  --version, -V       gorun's version and the commit it was built from
  -h, --help          this text

Hosts (default: the batch allocation gorun runs in, else this host only):
  -H, --host LIST     hosts and slots: h1:4,h2:4,h3 (host[:slots], [v6address][:slots]);
                      no slots = its CPU count; localhost (or this host's name) runs
                      ranks here, without ssh
  --hostfile FILE     hostfile, Open MPI's or MPICH's: "host [slots=N] [max_slots=M]
                      [port=P]" or "host:N" per line, # comments (also --machinefile);
                      host:N is always N slots, an ssh port is port=P or the ssh config
  --rankfile FILE, -rf FILE  Open MPI rankfile: "rank N=HOST [slot=CPU]" per line; places
                      (and binds) each rank; -np defaults to its ranks; its hosts are
                      the job's unless -H or --hostfile name them (one CPU per slot:
                      socket:core and CPU lists are refused)
  --map-by slot|node  fill each host's slots in turn (slot, default) or one rank per host
                      in turn (node)
  --bind-to core|none pin each rank to one CPU of its host, by local rank (default: core
                      where a host's ranks fit its CPUs, none where they do not)
  --report-bindings   print where each rank is bound before launching
  --display-map       print each host, how its -H or hostfile entry was read, and its
                      ranks, before launching
  --nooversubscribe   refuse more ranks than slots (default: allowed, with a warning)
  --if-include LIST   network for both control and data: interface names or CIDR blocks,
                      e.g. eth0 or 10.0.0.0/8 (default: the address each host was reached
                      at by ssh; container/VM bridges such as docker0 are never picked)
  --agents ssh|srun   how the agents of other hosts start (default: srun inside a Slurm
                      allocation when srun is there, else ssh); srun needs gorun and the
                      program at the same path on every node (a shared file system)
  --ssh-config FILE   ssh config to use instead of ~/.ssh/config and /etc/ssh/ssh_config
  --connect-timeout S seconds to connect to each host (default: the ssh config's
                      ConnectTimeout, else 10)

Inside a Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE,
SLURM_NTASKS) or a PBS one (PBS_NODEFILE), 'gorun PROGRAM' with no -H,
--hostfile or --rankfile runs on the allocation's nodes and slots, with
-np defaulting to its task count. Run gorun once per job, not under srun.

Remote hosts are reached with ssh (Host, HostName, User, Port, IdentityFile,
IdentitiesOnly, ProxyJump, UserKnownHostsFile, StrictHostKeyChecking and
ConnectTimeout from the ssh config; keys from the ssh-agent and the identity
files). A changed host key is always refused. On each host one agent (this
binary, copied to $TMPDIR/gorun-cache-UID when the host lacks it, verified
by SHA-256) starts that host's ranks and relays their output; it kills them
if gorun or the connection goes away.

Every rank gets OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (rank 0's
host and a port free there, as torchrun sets them for torch.distributed; yours
win when set) and gorun's own GORUN_* variables (GORUN_APPNUM, the index of
its program after ':', and GORUN_UNIVERSE_SIZE, the slots of the hosts, are
MPI_APPNUM and MPI_UNIVERSE_SIZE), and GOMAXPROCS = the CPUs a rank is bound
to (unbound: max(1, host cores / ranks on the host)) unless you set it.
Stdout and stderr of every rank are forwarded line by line, never two ranks
in one line; a line still unfinished when its rank pauses is shown at once
(prompts, '\r' progress bars). Stdin goes to rank 0. SIGUSR1 and SIGUSR2 to
gorun are passed on to every rank; SIGINT, SIGTERM and SIGHUP end the job;
SIGQUIT (Ctrl-\) asks every rank for its stacks first, each line tagged with
its rank, then ends the job (status 131).

Where gorun differs from Open MPI's mpirun on purpose:
  - more ranks than slots is allowed (with a warning); --oversubscribe is
    accepted with a note, --nooversubscribe refuses
  - running as root needs no --allow-run-as-root (accepted with a note)
  - tunables are GORUN_* variables (--help-params), not MCA parameters
  - a Go package directory is built before launch
  - host:N in a hostfile means N slots (MPICH's form), as in -H
  - -x VAR of a variable gorun's environment lacks is refused (mpirun warns
    and passes nothing)
  - no -np and no hosts, allocation or rankfile runs one rank (mpirun: one
    a core)
  - a host given without slots has its usable CPUs, hardware threads
    included (mpirun: its cores; each host of a -H list of several: one
    slot); without -np, a remote one must be given slots (host:N)

Exit status:
  0        every rank exited 0
  N        the first rank to fail exited with N, or called mpi.Abort(N)
  128+S    a rank was killed by signal S, or gorun received signal S
  124      --timeout expired
  125      gorun could not run the job (build failed, a host could not be reached,
           a rank exited without calling mpi.Init or mpi.Finalize while others
           needed it, wire-up failed), a rank stopped answering (frozen, or
           stopped with SIGSTOP), or lost a host (its agent died, or the host
           stopped responding: frozen or cut off the network)
  126/127  the program is not executable / not found
  2        a usage error (unknown flag, bad value, a request the hosts cannot
           meet: --nooversubscribe beyond the slots, a rankfile CPU a host
           lacks), in one line on stderr
`

// writeParams lists the tunables (--help-params): every one declared with
// internal/params by a package gorun links (btl/all's transports, btl,
// p2p, coll, launcher), then package gpu's.
func writeParams(w io.Writer) {
	for _, p := range params.All() {
		fmt.Fprintf(w, "%-28s default %-8q %s\n", p.Name, p.Default, p.Doc)
	}
	for _, p := range gpu.Params() {
		fmt.Fprintf(w, "%-28s default %-8q %s\n", p.Name, p.Default, p.Doc)
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == agent.Flag {
		os.Exit(agent.Main(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	code, err := runArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Print(usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: %v\n", err)
	}
	return code
}

// runArgs parses the command line and runs the job. A usage error returns
// status 2 with a one-line error; gorun's own failure to run the job
// returns its status (launcher.Exit*) with the error.
func runArgs(args []string) (int, error) {
	fs := flag.NewFlagSet("gorun", flag.ContinueOnError)
	np := fs.Int("np", 1, "")
	fs.IntVar(np, "n", 1, "")
	tag := fs.Bool("tag-output", false, "")
	outDir := fs.String("output-filename", "", "")
	timeout := fs.Int("timeout", 0, "")
	stacks := fs.Bool("get-stack-traces", false, "")
	boot := fs.Int("boot-timeout", 0, "")
	recovery := fs.Bool("enable-recovery", false, "")
	withFT := fs.String("with-ft", "", "")
	helpParams := fs.Bool("help-params", false, "")
	version := fs.Bool("version", false, "")
	fs.BoolVar(version, "V", false, "")
	topo := fs.Bool("topo", false, "")
	probe := fs.Bool("probe", false, "")
	var env envFlags
	fs.Var(&env, "x", "")
	var hostList string
	fs.StringVar(&hostList, "H", "", "")
	fs.StringVar(&hostList, "host", "", "")
	hostfile := fs.String("hostfile", "", "")
	rankfile := fs.String("rankfile", "", "")
	fs.StringVar(rankfile, "rf", "", "")
	verbose := fs.Bool("verbose", false, "")
	fs.BoolVar(verbose, "v", false, "")
	fs.StringVar(hostfile, "machinefile", "", "")
	mapBy := fs.String("map-by", launcher.MapBySlot, "")
	bindTo := fs.String("bind-to", "", "")
	reportBindings := fs.Bool("report-bindings", false, "")
	displayMap := fs.Bool("display-map", false, "")
	noOversub := fs.Bool("nooversubscribe", false, "")
	ifInclude := fs.String("if-include", "", "")
	sshConfig := fs.String("ssh-config", "", "")
	connTimeout := fs.Float64("connect-timeout", 0, "")
	agents := fs.String("agents", "", "")
	ctx, rest, err := splitArgs(args, fs)
	if err != nil {
		return 2, err
	}
	if err := parseFlags(fs, ctx.flags); err != nil {
		return 2, err
	}
	npSet := given(fs, "np", "n")
	if *version {
		fmt.Println(versionLine())
		return 0, nil
	}
	if *helpParams {
		writeParams(os.Stdout)
		return 0, nil
	}
	if *topo {
		if err := gpu.WriteTopology(os.Stdout, gpu.TopoOptions{Probe: *probe}); err != nil {
			return 1, fmt.Errorf("--topo: %w", err)
		}
		return 0, nil
	}
	if *probe {
		return 2, errors.New("--probe measures the GPU pairs that --topo prints: give --topo --probe")
	}
	if len(ctx.prog) == 0 {
		return 2, errors.New("no program given (usage: gorun [flags] PROGRAM [ARGS...]; gorun --help lists the flags)")
	}
	if v := os.Getenv("MPIEXEC_TIMEOUT"); v != "" && !given(fs, "timeout") {
		// mpirun's (and MPICH's mpiexec's) variable for --timeout.
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 2, fmt.Errorf("MPIEXEC_TIMEOUT=%q: want a whole number of seconds", v)
		}
		*timeout = n
	}
	if *np < 1 {
		return 2, fmt.Errorf("-np must be at least 1, not %d", *np)
	}
	if *timeout < 0 || *boot < 0 || *connTimeout < 0 {
		return 2, errors.New("timeouts must not be negative")
	}
	switch *agents {
	case "", launcher.AgentsSSH, launcher.AgentsSrun:
	default:
		return 2, fmt.Errorf("--agents %q: expected ssh or srun", *agents)
	}
	if *stacks && *timeout == 0 {
		return 2, errors.New("--get-stack-traces applies when --timeout expires: give --timeout SECONDS too")
	}
	notes := ctx.notes
	for _, p := range ctx.mca {
		m, err := mcaToGorun(p)
		if err != nil {
			return 2, err
		}
		if m.env != "" {
			k, v, _ := strings.Cut(m.env, "=")
			os.Setenv(k, v) // gorun's own tunables, and the ranks' (inherited, forwarded to other hosts)
		}
		if m.ifInclude != "" {
			*ifInclude = m.ifInclude
		}
		if m.note != "" {
			notes = append(notes, m.note)
		}
	}
	apps := []launcher.App{{NP: *np, Program: ctx.prog[0], Args: ctx.prog[1:]}}
	for len(rest) > 0 {
		app, n, more, err := appFlags(rest[1:])
		if err != nil {
			return 2, err
		}
		apps = append(apps, app)
		notes = append(notes, n...)
		rest = more
	}
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, n)
	}
	switch *withFT {
	case "":
	case "ulfm":
		*recovery = true
	default:
		return 2, fmt.Errorf("--with-ft %q: expected ulfm (Open MPI 5's spelling of --enable-recovery)", *withFT)
	}
	var hosts []launcher.Host
	emptyHosts := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "H", "host", "hostfile":
			emptyHosts = emptyHosts || f.Value.String() == ""
		}
	})
	if emptyHosts {
		return 2, errors.New("-H, --host or --hostfile given an empty value: name the hosts, or leave the flag out to run on this host")
	}
	if hostList != "" && *hostfile != "" {
		return 2, errors.New("give -H or --hostfile, not both")
	}
	if hostList != "" {
		if hosts, err = launcher.ParseHostList(hostList); err != nil {
			return 2, err
		}
	}
	if *hostfile != "" {
		if hosts, err = launcher.ParseHostfile(*hostfile); err != nil {
			return 2, err
		}
	}
	if !npSet && len(hosts) > 0 && *rankfile == "" && len(apps) == 1 {
		// As mpirun: no -np runs a rank on every slot of the hosts given.
		n, unknown := launcher.DefaultNP(hosts)
		if unknown != "" {
			return 2, fmt.Errorf("no -np, and %s has no slots given: its CPUs, which it would take, are known only once gorun reaches it; give -np N or %s:N", unknown, unknown)
		}
		*np, apps[0].NP = n, n
	}
	if who, n := launcher.ForeignLauncher(os.Getenv); n > 1 {
		return launcher.ExitInternal, fmt.Errorf("gorun itself was started by %s as one of %d processes: each would start a job of its own. Run gorun once (in the batch script or the salloc shell); inside an allocation it starts the ranks on every node", who, n)
	}
	var alloc *launcher.Allocation
	if len(hosts) == 0 && *rankfile == "" {
		if alloc, err = launcher.FindAllocation(os.Getenv); err != nil {
			return 2, err
		}
	}
	if alloc != nil {
		hosts = alloc.Hosts
		if !npSet && len(apps) == 1 {
			*np = alloc.NP
			apps[0].NP = alloc.NP
		}
		if *agents == "" && strings.HasPrefix(alloc.System, "Slurm") {
			if _, err := exec.LookPath("srun"); err == nil {
				*agents = launcher.AgentsSrun
			}
		}
	}
	var rf []launcher.RankSlot
	if *rankfile != "" {
		if rf, err = launcher.ParseRankfile(*rankfile); err != nil {
			return 2, err
		}
		if !npSet {
			*np = len(rf)
		}
		if len(apps) > 1 {
			return 2, errors.New("--rankfile with several programs (':') is not supported")
		}
		apps[0].NP = *np
	}
	spec := launcher.Spec{
		Rankfile:    rf,
		Agents:      *agents,
		Verbose:     *verbose,
		TagOutput:   *tag,
		OutputDir:   *outDir,
		Timeout:     time.Duration(*timeout) * time.Second,
		StackTraces: *stacks,
		BootTimeout: time.Duration(*boot) * time.Second,
		Recovery:    *recovery,
		Env:         env,
		Stdin:       os.Stdin,

		Hosts:           hosts,
		MapBy:           *mapBy,
		BindTo:          *bindTo,
		ReportBindings:  *reportBindings,
		DisplayMap:      *displayMap,
		NoOversubscribe: *noOversub,
		IfInclude:       *ifInclude,
		SSHConfig:       *sshConfig,
		ConnectTimeout:  time.Duration(*connTimeout * float64(time.Second)),
	}
	if alloc != nil {
		spec.SlurmCPUs = alloc.CPUs
	}
	if len(apps) == 1 {
		spec.NP, spec.Program, spec.Args = *np, apps[0].Program, apps[0].Args
	} else {
		spec.Apps = apps
	}
	return launcher.Run(spec)
}
