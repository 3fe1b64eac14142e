package boot

import (
	"fmt"
	"os"
	"strconv"
)

// Environment variables set by gorun for every rank. Programs written for
// Open MPI or torchrun find their place through OMPI_COMM_WORLD_* and
// RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE, which gorun sets too.
const (
	EnvRank      = "GORUN_RANK"
	EnvSize      = "GORUN_SIZE"
	EnvLocalRank = "GORUN_LOCAL_RANK"
	EnvLocalSize = "GORUN_LOCAL_SIZE"
	EnvJobID     = "GORUN_JOBID"
	EnvHostID    = "GORUN_HOSTID"
	EnvSeed      = "GORUN_SEED"      // host:port of the launcher's memberlist node
	EnvBindAddr  = "GORUN_BIND_ADDR" // IP this rank listens on
	EnvCtlFD     = "GORUN_CTL_FD"    // inherited control socket
	EnvBootWait  = "GORUN_BOOT_TIMEOUT"
	EnvRecovery  = "GORUN_RECOVERY" // "1": gorun --enable-recovery (recovery.go)
	// EnvAppNum is the index of the rank's program in an MPMD job
	// (gorun -np 2 ./a : -np 1 ./b gives 0, 0, 1): MPI_APPNUM.
	EnvAppNum = "GORUN_APPNUM"
	// EnvUniverseSize is the number of processes the job could hold: the
	// slots of its hosts, or its size when that is larger
	// (MPI_UNIVERSE_SIZE).
	EnvUniverseSize = "GORUN_UNIVERSE_SIZE"
)

// Env is a rank's place in the job.
type Env struct {
	Rank, Size           int
	LocalRank, LocalSize int
	JobID                string
	HostID               string
	Seed                 string
	BindAddr             string
	// Secret is the job secret, read from the control socket.
	Secret []byte
	// Singleton is true when the process was not started by gorun.
	Singleton bool
	// Recovery is true when gorun runs the job with --enable-recovery: a
	// failed rank does not end the job (recovery.go).
	Recovery bool
	// AppNum is the index of this rank's program in an MPMD job (0 in a
	// job of one program); -1 in a singleton, which no launcher started.
	AppNum int
	// UniverseSize is the number of processes the job's hosts have slots
	// for, at least Size.
	UniverseSize int

	ctl *ctlConn
}

// ReadEnv reads the rank's environment and, under gorun, its secret from
// the control socket. It is called once, by Init.
func ReadEnv() (*Env, error) {
	rs, ok := os.LookupEnv(EnvRank)
	if !ok {
		if who, n := ForeignLauncher(os.Getenv); n > 1 {
			return nil, fmt.Errorf("boot: this process was started by %s as one of %d processes, not by gorun: each would run alone as rank 0 of 1. A gorun program needs gorun's launcher: gorun -np %d PROGRAM (inside a Slurm allocation, gorun PROGRAM uses it)", who, n, n)
		}
		host, _ := os.Hostname()
		return &Env{Rank: 0, Size: 1, LocalSize: 1, Singleton: true, HostID: host, JobID: fmt.Sprintf("single-%d", os.Getpid()),
			AppNum: -1, UniverseSize: 1}, nil
	}
	e := &Env{}
	var err error
	geti := func(name string) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = strconv.Atoi(os.Getenv(name))
		if err != nil {
			err = fmt.Errorf("boot: %s=%q: %w", name, os.Getenv(name), err)
		}
		return v
	}
	_ = rs
	e.Rank = geti(EnvRank)
	e.Size = geti(EnvSize)
	e.LocalRank = geti(EnvLocalRank)
	e.LocalSize = geti(EnvLocalSize)
	fd := geti(EnvCtlFD)
	// Optional: a gorun older than these variables does not set them.
	e.AppNum, e.UniverseSize = 0, e.Size
	if _, ok := os.LookupEnv(EnvAppNum); ok {
		e.AppNum = geti(EnvAppNum)
	}
	if _, ok := os.LookupEnv(EnvUniverseSize); ok {
		e.UniverseSize = max(geti(EnvUniverseSize), e.Size)
	}
	if err != nil {
		return nil, err
	}
	if e.Size < 1 || e.Rank < 0 || e.Rank >= e.Size {
		return nil, fmt.Errorf("boot: rank %d of %d is not a place in a job", e.Rank, e.Size)
	}
	e.JobID = os.Getenv(EnvJobID)
	e.HostID = os.Getenv(EnvHostID)
	e.Seed = os.Getenv(EnvSeed)
	e.BindAddr = os.Getenv(EnvBindAddr)
	e.Recovery = os.Getenv(EnvRecovery) == "1"
	if e.Seed == "" || e.JobID == "" {
		return nil, fmt.Errorf("boot: %s or %s missing: was this process started by gorun?", EnvSeed, EnvJobID)
	}
	e.ctl, err = openCtl(fd)
	if err != nil {
		// gorun passes the socket as an inherited descriptor: a wrapper
		// between gorun and this program that closes what it inherits
		// (Python's subprocess by default) leaves fd closed or reused.
		return nil, fmt.Errorf("boot: control socket fd %d: %w (gorun hands each rank this descriptor: a wrapper that starts the program must pass it on, e.g. exec the program, or Python's subprocess with close_fds=False or pass_fds=(%d,))", fd, err, fd)
	}
	hello, err := e.ctl.read()
	if err != nil {
		return nil, fmt.Errorf("boot: reading the job secret: %w", err)
	}
	if hello.Kind != MsgHello || len(hello.Secret) < 16 {
		return nil, fmt.Errorf("boot: control socket sent %q, not the job secret", hello.Kind)
	}
	e.Secret = hello.Secret
	return e, nil
}

// ForeignLauncher recognizes another launcher's environment in getenv (a
// process started by Open MPI's mpirun, MPICH's Hydra, a PMIx server or
// srun) and returns its name and the number of processes it started (0:
// none recognized). A gorun rank is never asked: gorun's own variables
// come first.
func ForeignLauncher(getenv func(string) string) (string, int) {
	for _, v := range []struct{ name, who string }{
		{"OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"},
		{"PMIX_SIZE", "a PMIx launcher"},
		{"PMI_SIZE", "a PMI launcher (MPICH's mpiexec/Hydra, or srun --mpi=pmi2)"},
		{"SLURM_STEP_NUM_TASKS", "srun"}, // set for a step's tasks, not in a batch script
	} {
		if n, err := strconv.Atoi(getenv(v.name)); err == nil && n > 0 {
			return fmt.Sprintf("%s (%s=%d)", v.who, v.name, n), n
		}
	}
	return "", 0
}
