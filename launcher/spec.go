package launcher

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Spec describes a job.
type Spec struct {
	// NP is the number of ranks.
	NP int
	// Program is a Go package directory (built once with `go build`) or an
	// executable found like a shell would; Args follow it.
	Program string
	Args    []string
	// Apps, when set, is an MPMD job (gorun -np 2 ./a : -np 1 ./b): each
	// program's ranks follow the previous one's, and NP, Program and Args
	// are ignored.
	Apps []App
	// OutputDir, when set (--output-filename), also receives each rank's
	// output in OutputDir/1/rank.N/stdout and .../stderr, Open MPI 4.1's
	// layout, as it comes (partial lines included).
	OutputDir string
	// TagOutput prefixes every forwarded line with the rank that wrote it.
	TagOutput bool
	// Timeout ends a job that runs longer (0: no limit).
	Timeout time.Duration
	// Recovery keeps the job running when a rank fails: the others are
	// told and may go on (package mpi's Revoke, Shrink, Agree;
	// recovery.go). Off, a failed rank ends the job.
	Recovery bool
	// StackTraces, with Timeout, asks every rank for its stacks before the
	// job is ended (SIGQUIT: a Go program prints every goroutine's stack
	// and exits), as mpirun's --get-stack-traces.
	StackTraces bool
	// BootTimeout is how long ranks that called mpi.Init wait for the
	// others before the job is ended (0: DefaultBootTimeout).
	BootTimeout time.Duration
	// Env is added to every rank's environment (KEY=value).
	Env []string
	// Stdin goes to rank 0 (nil: /dev/null). Stdout and Stderr receive the
	// ranks' forwarded output and gorun's own messages.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Hosts are where the ranks run (-H, --hostfile); empty means this
	// host alone. Hosts other than this one are reached over ssh, where a
	// per-host agent starts their ranks.
	Hosts []Host
	// Rankfile, when set (--rankfile), places rank r on Rankfile[r].Host,
	// bound to its CPU when it names one, instead of MapBy; NP must equal
	// its length. With no Hosts, its hosts are the job's.
	Rankfile []RankSlot
	// MapBy is MapBySlot (default: fill each host's slots in turn) or
	// MapByNode (one rank per host in turn).
	MapBy string
	// BindTo is BindNone, BindCore (each rank is pinned to one CPU of its
	// host, by local rank, before the program starts), or "" (default):
	// BindCore on hosts whose ranks fit their CPUs, BindNone elsewhere.
	BindTo string
	// ReportBindings prints each rank's binding on Stderr before launch.
	ReportBindings bool
	// DisplayMap prints the hosts, their slots (and how each host entry
	// was read) and the ranks placed on each, on Stderr before launch.
	DisplayMap bool
	// NoOversubscribe refuses more ranks than slots (the default allows
	// it, with one warning line).
	NoOversubscribe bool
	// IfInclude selects the network, by interface names or CIDR blocks
	// (comma-separated), for both the membership (control) and the ranks'
	// transports (data) on every host. Empty: the address each host was
	// reached at by ssh, never a container or VM bridge by default.
	IfInclude string
	// SSHConfig replaces ~/.ssh/config and /etc/ssh/ssh_config (like
	// ssh -F).
	SSHConfig string
	// Verbose prints the launch's steps (connects, agents, spawns,
	// wire-up) with their times since the start on Stderr, as
	// GORUN_LAUNCH_TRACE=1 does.
	Verbose bool
	// Agents is how the agents of other hosts start: AgentsSSH (default)
	// or AgentsSrun (inside a Slurm allocation; gorun and the program
	// must be on a shared file system). SlurmCPUs is each node's CPUs in
	// the allocation, given to srun's step.
	Agents    string
	SlurmCPUs map[string]int
	// ConnectTimeout bounds connecting to each host (0: the ssh config's
	// ConnectTimeout, else DefaultConnectTimeout).
	ConnectTimeout time.Duration
}

// How agents start (Spec.Agents).
const (
	AgentsSSH  = "ssh"
	AgentsSrun = "srun"
)

// App is one program of an MPMD job: NP ranks running Program with Args,
// with Env added to their environment after Spec.Env.
type App struct {
	NP      int
	Program string
	Args    []string
	Env     []string
}

// DefaultBootTimeout bounds the wait, from the first rank's mpi.Init, for
// every rank to call it.
const DefaultBootTimeout = 60 * time.Second

// Exit statuses of gorun beyond a rank's own (documented in gorun --help).
const (
	ExitOK       = 0
	ExitUsage    = 2   // the command line, a hostfile or a rankfile asks for what gorun cannot do
	ExitTimeout  = 124 // --timeout expired
	ExitInternal = 125 // gorun could not run the job (build, spawn, wire-up), or lost a host
	ExitNoExec   = 126 // program not executable
	ExitNotFound = 127 // program not found
	ExitSignal   = 128 // + signal number: a rank died by, or gorun got, a signal
)

// killGrace is how long ranks get between SIGTERM and SIGKILL when the job
// ends early; the issue asks that the others stop within 1 s.
const killGrace = 500 * time.Millisecond

// usageError is an error of the request itself (ExitUsage), not of
// running it.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef makes a usageError.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitOf is the status of err from setting up the job: ExitUsage for a
// usageError, ExitInternal otherwise.
func exitOf(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return ExitUsage
	}
	return ExitInternal
}

// MaxNP is the most ranks a job may ask for, and MaxLocalNP the most on
// one host (each spawn waits in its agent's queue of sendqLen frames
// until the agent takes it).
const (
	MaxNP      = 1 << 20
	MaxLocalNP = sendqLen - 64
)
