package launcher

import (
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
	// TagOutput prefixes every forwarded line with the rank that wrote it.
	TagOutput bool
	// Timeout ends a job that runs longer (0: no limit).
	Timeout time.Duration
	// BootTimeout is how long ranks that called mpi.Init wait for the
	// others before the job is ended (0: DefaultBootTimeout).
	BootTimeout time.Duration
	// Env is added to every rank's environment (KEY=value).
	Env []string
	// Stdin goes to rank 0 (nil: /dev/null). Stdout and Stderr receive the
	// ranks' forwarded output and gorun's own messages.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// DefaultBootTimeout bounds the wait, from the first rank's mpi.Init, for
// every rank to call it.
const DefaultBootTimeout = 60 * time.Second

// Exit statuses of gorun beyond a rank's own (documented in gorun --help).
const (
	ExitOK       = 0
	ExitTimeout  = 124 // --timeout expired
	ExitInternal = 125 // gorun could not run the job (build, spawn, wire-up)
	ExitNoExec   = 126 // program not executable
	ExitNotFound = 127 // program not found
	ExitSignal   = 128 // + signal number: a rank died by, or gorun got, a signal
)

// killGrace is how long ranks get between SIGTERM and SIGKILL when the job
// ends early; the issue asks that the others stop within 1 s.
const killGrace = 500 * time.Millisecond
