// Command gorun launches an MPI job of Go programs (or any program):
//
//	gorun -np 4 ./examples/hello
//
// Run `gorun --help` for the flags and exit statuses.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	_ "github.com/gorun/gorun/btl/all" // the transports' tunables appear in --help-params, as do these:
	_ "github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher"
	_ "github.com/gorun/gorun/p2p"
)

const usage = `usage: gorun [flags] PROGRAM [ARGS...]

PROGRAM is a Go package directory (built once with 'go build') or any
executable, found like a shell would.

Flags:
  -np N, -n N         number of ranks (default 1)
  --tag-output        prefix every output line with [rank,stream]
  --timeout SECONDS   end the job after SECONDS (exit status 124)
  --boot-timeout SEC  how long ranks in mpi.Init wait for the others (default 60)
  --enable-recovery   a failed rank does not end the job: the others see ErrProcFailed and
                      may go on (mpi's Revoke, Shrink, Agree: ULFM); also --with-ft ulfm
  -x VAR[=VALUE]      pass VAR (from gorun's environment, or set to VALUE) to the ranks
                      (remote ranks also get every GORUN_* variable of gorun's environment)
  --help-params       list the GORUN_* tunables with their defaults
  --topo              print this host's GPUs, NICs and NUMA placement like
                      'nvidia-smi topo -m', and the path the runtime uses per GPU pair
  --probe             with --topo: also measure each GPU pair's copy bandwidth
  -h, --help          this text

Hosts (default: this host only):
  -H, --host LIST     hosts and slots: h1:4,h2:4,h3 (host[:slots]); no slots = its CPU count;
                      localhost (or this host's name) runs ranks here, without ssh
  --hostfile FILE     Open MPI hostfile: "host [slots=N] [max_slots=M]" per line, # comments
                      (also --machinefile)
  --map-by slot|node  fill each host's slots in turn (slot, default) or one rank per host
                      in turn (node)
  --bind-to core|none pin each rank to one CPU of its host, by local rank (default: core
                      where a host's ranks fit its CPUs, none where they do not)
  --report-bindings   print where each rank is bound before launching
  --nooversubscribe   refuse more ranks than slots (default: allowed, with a warning)
  --if-include LIST   network for both control and data: interface names or CIDR blocks,
                      e.g. eth0 or 10.0.0.0/8 (default: the address each host was reached
                      at by ssh; container/VM bridges such as docker0 are never picked)
  --ssh-config FILE   ssh config to use instead of ~/.ssh/config and /etc/ssh/ssh_config
  --connect-timeout S seconds to connect to each host (default: the ssh config's
                      ConnectTimeout, else 10)

Remote hosts are reached with ssh (Host, HostName, User, Port, IdentityFile,
IdentitiesOnly, ProxyJump, UserKnownHostsFile, StrictHostKeyChecking and
ConnectTimeout from the ssh config; keys from the ssh-agent and the identity
files). A changed host key is always refused. On each host one agent (this
binary, copied to $TMPDIR/gorun-cache-UID when the host lacks it, verified
by SHA-256) starts that host's ranks and relays their output; it kills them
if gorun or the connection goes away.

Every rank gets OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and gorun's own GORUN_* variables, and
GOMAXPROCS = max(2, host cores / ranks on the host) unless you set it.
Stdout and stderr of every rank are forwarded line by line; stdin goes to
rank 0.

Exit status:
  0        every rank exited 0
  N        the first rank to fail exited with N, or called mpi.Abort(N)
  128+S    a rank was killed by signal S, or gorun received signal S
  124      --timeout expired
  125      gorun could not run the job (build failed, a host could not be reached,
           a rank exited without calling mpi.Init or mpi.Finalize while others
           needed it, wire-up failed), or lost a host (its agent died, or the
           host stopped responding: frozen or cut off the network)
  126/127  the program is not executable / not found
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

type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, ",") }
func (e *envFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); ok {
		if k == "" {
			return fmt.Errorf("empty variable name in %q", v)
		}
		*e = append(*e, v)
		return nil
	}
	val, ok := os.LookupEnv(v)
	if !ok {
		return fmt.Errorf("-x %s: not set in gorun's environment", v)
	}
	*e = append(*e, v+"="+val)
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == launcher.AgentFlag {
		os.Exit(launcher.RunAgent(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("gorun", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	np := fs.Int("np", 1, "")
	fs.IntVar(np, "n", 1, "")
	tag := fs.Bool("tag-output", false, "")
	timeout := fs.Int("timeout", 0, "")
	boot := fs.Int("boot-timeout", 0, "")
	recovery := fs.Bool("enable-recovery", false, "")
	withFT := fs.String("with-ft", "", "")
	helpParams := fs.Bool("help-params", false, "")
	topo := fs.Bool("topo", false, "")
	probe := fs.Bool("probe", false, "")
	var env envFlags
	fs.Var(&env, "x", "")
	var hostList string
	fs.StringVar(&hostList, "H", "", "")
	fs.StringVar(&hostList, "host", "", "")
	hostfile := fs.String("hostfile", "", "")
	fs.StringVar(hostfile, "machinefile", "", "")
	mapBy := fs.String("map-by", launcher.MapBySlot, "")
	bindTo := fs.String("bind-to", "", "")
	reportBindings := fs.Bool("report-bindings", false, "")
	noOversub := fs.Bool("nooversubscribe", false, "")
	ifInclude := fs.String("if-include", "", "")
	sshConfig := fs.String("ssh-config", "", "")
	connTimeout := fs.Float64("connect-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Print(usage)
			return 0
		}
		return 2
	}
	if *helpParams {
		writeParams(os.Stdout)
		return 0
	}
	if *topo {
		if err := gpu.WriteTopology(os.Stdout, gpu.TopoOptions{Probe: *probe}); err != nil {
			fmt.Fprintf(os.Stderr, "gorun: --topo: %v\n", err)
			return 1
		}
		return 0
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(os.Stderr, "gorun: no program given\n\n"+usage)
		return 2
	}
	if *np < 1 {
		fmt.Fprintf(os.Stderr, "gorun: -np must be at least 1, not %d\n", *np)
		return 2
	}
	if *timeout < 0 || *boot < 0 || *connTimeout < 0 {
		fmt.Fprintf(os.Stderr, "gorun: timeouts must not be negative\n")
		return 2
	}
	switch *withFT {
	case "":
	case "ulfm", "mpi":
		*recovery = true
	default:
		fmt.Fprintf(os.Stderr, "gorun: --with-ft %q: expected ulfm\n", *withFT)
		return 2
	}
	var hosts []launcher.Host
	if hostList != "" && *hostfile != "" {
		fmt.Fprintf(os.Stderr, "gorun: give -H or --hostfile, not both\n")
		return 2
	}
	if hostList != "" {
		h, err := launcher.ParseHostList(hostList)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gorun: %v\n", err)
			return 2
		}
		hosts = h
	}
	if *hostfile != "" {
		h, err := launcher.ParseHostfile(*hostfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gorun: %v\n", err)
			return 2
		}
		hosts = h
	}
	code, err := launcher.Run(launcher.Spec{
		NP:          *np,
		Program:     rest[0],
		Args:        rest[1:],
		TagOutput:   *tag,
		Timeout:     time.Duration(*timeout) * time.Second,
		BootTimeout: time.Duration(*boot) * time.Second,
		Recovery:    *recovery,
		Env:         env,
		Stdin:       os.Stdin,

		Hosts:           hosts,
		MapBy:           *mapBy,
		BindTo:          *bindTo,
		ReportBindings:  *reportBindings,
		NoOversubscribe: *noOversub,
		IfInclude:       *ifInclude,
		SSHConfig:       *sshConfig,
		ConnectTimeout:  time.Duration(*connTimeout * float64(time.Second)),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: %v\n", err)
	}
	return code
}
