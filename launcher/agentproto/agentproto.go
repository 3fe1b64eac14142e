// Package agentproto is the contract between the launcher and its per-host
// agents (package launcher/agent): the frames both sides read and write,
// and the heartbeat tunables both sides obey. Neither side's code is here;
// both import it.
//
// The launcher starts one agent on every host of a job, its own included,
// and talks to it over one byte stream each way. Backends differ only in
// how an agent starts and what carries its stream: on the launcher's own
// host an agent runs in the launcher's process over a pair of pipes; on
// other hosts it is `gorun --agent ...` in one ssh session, or in one srun
// step per node inside a Slurm allocation, whose stdin and stdout carry the
// stream. A frame is a 4-byte little-endian length and a msgpack-encoded
// Msg. An agent's stderr carries only its own diagnostics, which the
// launcher prints prefixed with the host.
//
// Launcher to agent:
//
//	setup   JobID, Secret: the job; sent once, before any spawn
//	spawn   Rank, Prog, Args, Env (added to the agent's own environment),
//	        Dir, Bind (CPUs; none: unbound), Stdin (rank 0)
//	stdin   Data for rank 0; an empty Data means end of input
//	signal  Sig to every rank's process group (SIGTERM and SIGKILL to end
//	        the job, SIGUSR1/SIGUSR2 passed on, SIGQUIT for stacks)
//	kill    SIGKILL to Rank's process group (a rank declared failed under
//	        --enable-recovery)
//	hb      heartbeat, every Beat
//	bye     the job is over: kill what is left, clean up, exit
//
// Agent to launcher:
//
//	hello    Version, Host, PID, NCPU, CPUs, Addr (where its ranks
//	         listen), ProgOK (per program the launcher named: present and
//	         the same here), Err (the agent cannot serve: a bad
//	         --if-include)
//	started  Rank, PID (or Err: the spawn failed)
//	out      Rank, Stream (1 stdout, 2 stderr), Data: a chunk, not a line
//	ctl      Rank, Ctl: a control message of the rank (Finalized, Abort)
//	exited   Rank, Status: the raw wait status, after the rank's last
//	         output and control message
//	state    Rank, Stopped: the rank's process was stopped (SIGSTOP, a
//	         debugger) or runs again; checked every Beat, sent on change.
//	         A rank the failure detector gives up on is dead only if it is
//	         stopped: a running one is busy (launcher/events.go onDead).
//	hb       heartbeat, every Beat
//
// Order: frames of one rank arrive in the order the agent saw its events
// (its last output and control messages before its exited). Either side
// ends the other's work when the stream breaks or goes silent for Timeout:
// the launcher ends the job naming the host and its ranks; the agent
// SIGKILLs its ranks' process groups and exits, so a lost launcher or a cut
// network never leaves ranks behind. An agent in the launcher's own process
// is never declared silent (it cannot be cut off from it), but its stream
// ends the same way.
package agentproto

import (
	"io"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher/boot"
)

// Version is the protocol version; an agent refuses a launcher that speaks
// another, and the launcher an agent whose hello does. 3: ProgOK is one
// flag per program (MPMD across hosts).
const Version = 3

// Frame kinds (Msg.Kind), launcher to agent.
const (
	Setup  = "setup"
	Spawn  = "spawn"
	Stdin  = "stdin"
	Signal = "signal"
	Kill   = "kill"
	Bye    = "bye"
)

// Frame kinds (Msg.Kind), agent to launcher.
const (
	Hello   = "hello"
	Started = "started"
	Out     = "out"
	Ctl     = "ctl"
	Exited  = "exited"
	State   = "state"
)

// Heartbeat is a frame kind sent both ways every Beat.
const Heartbeat = "hb"

// Output streams (Msg.Stream of an out frame).
const (
	Stdout = 1
	Stderr = 2
)

// Msg is one frame of the protocol; Kind says which fields matter (the
// table above).
type Msg struct {
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
	ProgOK  []bool `msgpack:"ok,omitempty"`

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

// MaxMsg bounds one frame; anything larger is corruption.
const MaxMsg = 16 << 20

// Write writes one frame. It is not safe for concurrent use: each side
// serializes its writers.
func Write(w io.Writer, m *Msg) error { return boot.WriteFrame(w, m) }

// Read reads one frame; a malformed or oversized one is an error, never a
// panic.
func Read(r io.Reader) (*Msg, error) {
	m := &Msg{}
	if err := boot.ReadFrame(r, m, "agent frame", MaxMsg); err != nil {
		return nil, err
	}
	return m, nil
}

// Writer writes frames, each with one Write call, reusing one buffer (no
// allocation per frame). It is not safe for concurrent use.
type Writer struct{ fw *boot.FrameWriter }

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{boot.NewFrameWriter(w)} }

// Write writes one frame.
func (w *Writer) Write(m *Msg) error { return w.fw.Write(m) }

// Reader reads frames reusing its buffers: the Data of a frame it returns
// is valid only until the next Read (copy what you keep). Output chunks,
// the bulk of the stream, then cost no allocation. It is not safe for
// concurrent use.
type Reader struct {
	r         io.Reader
	buf, data []byte
}

// NewReader returns a Reader reading from r (buffer it: a frame is two
// reads).
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Read reads one frame, as the function Read does.
func (r *Reader) Read() (*Msg, error) {
	m := &Msg{Data: r.data[:0]}
	if err := boot.ReadFrameBuf(r.r, m, "agent frame", MaxMsg, &r.buf); err != nil {
		return nil, err
	}
	if cap(m.Data) > cap(r.data) {
		r.data = m.Data[:0]
	}
	return m, nil
}

var (
	// Beat is how often each side sends a heartbeat.
	Beat = params.PositiveDuration("GORUN_AGENT_HEARTBEAT", 100*time.Millisecond,
		"how often the launcher and each remote agent tell each other they are alive")
	// Timeout is the silence after which either side gives the other up.
	Timeout = params.PositiveDuration("GORUN_AGENT_TIMEOUT", 2400*time.Millisecond,
		"silence after which the launcher declares a remote agent lost (ending the job), and an agent kills its ranks and exits")
)
