package launcher

import (
	"io"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher/boot"
)

// The agent protocol. The launcher starts one agent per remote host
// (`gorun --agent ...` in one ssh session, or in one srun step per node
// inside a Slurm allocation: agentProc is the only difference) and talks
// to it over its stdin and stdout: frames of a 4-byte little-endian length
// and a msgpack-encoded agentMsg. The agent's stderr carries only its own
// diagnostics, which the launcher prints prefixed with the host.
//
// Launcher to agent:
//
//	setup   JobID, Secret: the job; sent once, before any spawn
//	spawn   Rank, Prog, Args, Env, Dir, Bind (CPUs; none: unbound), Stdin
//	        (rank 0)
//	stdin   Data for rank 0; an empty Data means end of input
//	signal  Sig to every rank's process group (SIGTERM, then SIGKILL)
//	kill    SIGKILL to Rank's process group (a rank declared failed under
//	        --enable-recovery)
//	hb      heartbeat, every agentBeat
//	bye     the job is over: kill what is left, clean up, exit
//
// Agent to launcher:
//
//	hello    Host, PID, NCPU, CPUs, Addr (where its ranks listen), ProgOK
//	started  Rank, PID (or Err: the spawn failed)
//	out      Rank, Stream (1 stdout, 2 stderr), Data: a chunk, not a line
//	ctl      Rank, Ctl: a control message of the rank (Finalized, Abort)
//	exited   Rank, Status: the raw wait status, after the rank's last
//	         output and control message
//	state    Rank, Stopped: the rank's process was stopped (SIGSTOP, a
//	         debugger) or runs again; checked every agentBeat, sent on
//	         change. A rank the failure detector gives up on is dead only
//	         if it is stopped: a running one is busy (events.go onDead).
//	hb       heartbeat, every agentBeat
//
// Either side ends the other's work when the stream breaks or goes silent
// for agentTimeout: the launcher ends the job naming the host and its
// ranks; the agent SIGKILLs its ranks' process groups and exits, so a lost
// launcher or a cut network never leaves ranks behind.
const agentProtoVersion = 2

// agentMsg is one frame of the agent protocol; Kind says which fields
// matter.
type agentMsg struct {
	Kind   string       `msgpack:"k"`
	Rank   int          `msgpack:"r,omitempty"`
	PID    int          `msgpack:"p,omitempty"`
	Err    string       `msgpack:"e,omitempty"`
	Data   []byte       `msgpack:"d,omitempty"`
	Stream int          `msgpack:"st,omitempty"`
	Status uint32       `msgpack:"ws,omitempty"`
	Sig    int          `msgpack:"sg,omitempty"`
	Ctl    *boot.CtlMsg `msgpack:"c,omitempty"`

	// state
	Stopped bool `msgpack:"stop,omitempty"`

	// hello
	Version int    `msgpack:"v,omitempty"`
	Host    string `msgpack:"h,omitempty"`
	NCPU    int    `msgpack:"n,omitempty"`
	CPUs    []int  `msgpack:"cpus,omitempty"`
	Addr    string `msgpack:"a,omitempty"`
	ProgOK  bool   `msgpack:"ok,omitempty"`

	// setup
	JobID  string `msgpack:"j,omitempty"`
	Secret []byte `msgpack:"s,omitempty"`

	// spawn
	Prog  string   `msgpack:"prog,omitempty"`
	Args  []string `msgpack:"args,omitempty"`
	Env   []string `msgpack:"env,omitempty"`
	Dir   string   `msgpack:"dir,omitempty"`
	Bind  []int    `msgpack:"bind,omitempty"` // the CPUs to bind to; none: unbound
	Stdin bool     `msgpack:"in,omitempty"`
}

// maxAgentMsg bounds one frame; anything larger is corruption.
const maxAgentMsg = 16 << 20

func writeAgentMsg(w io.Writer, m *agentMsg) error { return boot.WriteFrame(w, m) }

func readAgentMsg(r io.Reader) (*agentMsg, error) {
	m := &agentMsg{}
	if err := boot.ReadFrame(r, m, "agent frame", maxAgentMsg); err != nil {
		return nil, err
	}
	return m, nil
}

var (
	pAgentBeat = params.Duration("GORUN_AGENT_HEARTBEAT", 100*time.Millisecond,
		"how often the launcher and each remote agent tell each other they are alive")
	pAgentTimeout = params.Duration("GORUN_AGENT_TIMEOUT", 2400*time.Millisecond,
		"silence after which the launcher declares a remote agent lost (ending the job), and an agent kills its ranks and exits")
)
