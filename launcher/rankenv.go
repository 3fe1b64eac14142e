package launcher

// What each rank finds in its environment.

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gorun/gorun/launcher/boot"
)

// rankEnv is what rank r's agent on hs adds to its own environment for
// the rank: the runtime's tunables from gorun's environment (forwardedEnv;
// an agent in gorun's process has them already), the MPI and gorun
// variables, then the user's -x variables.
func (j *job) rankEnv(r int, hs *hostState) []string {
	var env, inherited []string
	if hs.here {
		inherited = os.Environ()
	} else {
		env = forwardedEnv()
	}
	has := func(k string) bool { return hasVar(inherited, k) || hasVar(env, k) }
	set := func(k string, v any) { env = append(env, k+"="+fmt.Sprint(v)) }
	n := j.spec.NP
	pl := j.lay.ranks[r]
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
		if v != "" && !has(k) {
			set(k, v)
		}
	}
	set(boot.EnvJobID, j.id)
	set(boot.EnvHostID, hs.hostID)
	set(boot.EnvSeed, j.seed.Addr())
	set(boot.EnvBindAddr, hs.addr)
	set(boot.EnvCtlFD, 3)
	set(boot.EnvBootWait, int(j.spec.BootTimeout/time.Second))
	if j.spec.Recovery {
		set(boot.EnvRecovery, 1)
	}
	set(boot.EnvAppNum, j.appOf[r])
	set(boot.EnvUniverseSize, max(j.lay.slots, n))
	if !has("GORUN_OVERSUBSCRIBED") {
		// Said both ways: left to itself, a rank compares the world's
		// size with runtime.NumCPU, which counts the CPUs it is bound
		// to (one), and took every run of two ranks or more for an
		// oversubscribed one (no spinning phase in its waits: np=2
		// latency 1.5 µs instead of 0.45 on the 2-core machine).
		set("GORUN_OVERSUBSCRIBED", b2i(ln > len(hs.cpus)))
	}
	if !has("GOMAXPROCS") && !hasVar(j.spec.Env, "GOMAXPROCS") {
		// A Go rank otherwise runs as many Ps (and a quarter as many GC
		// workers) as the host has cores: 32 ranks on 64 cores then fight
		// over the CPUs while they wait, and small collectives took 2-10x
		// longer from run to run. Share the host's cores among its ranks,
		// as the binding does: as many Ps as the CPUs a rank is bound to,
		// one where ranks fill or outnumber the cores. One P on one CPU,
		// not two: with a second, a rank's goroutine moved to another
		// thread of the same CPU at every preemption and yield (the idle
		// P's thread woke to take it), and a nonblocking collective's
		// goroutine waited for the other P's thread to steal it (50 µs
		// naps); the waits give way to such goroutines instead (p2p,
		// Engine.Helping). On the lent 32-core host, two Ps against one:
		// Ibarrier+Wait at np=2-32 7-20 µs against 2.5-14, the 99th
		// percentile of a barrier at np=32 9.5-13.7 µs against 2.8-3.5
		// (docs/measurements.md, "Nonblocking collectives").
		n := len(hs.cpus) / max(ln, 1)
		if set := j.cpusOf(r); set != nil {
			n = len(set)
		}
		set("GOMAXPROCS", max(1, n))
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
