// Package launcher starts and supervises a gorun job: it resolves the
// program (building a Go package directory once), creates the job secret,
// runs the memberlist seed that collects every rank's business card and
// pushes the roster, spawns the ranks with their environment, forwards their
// stdio line by line, and ends the job cleanly on the first failure, on a
// signal, on Abort or on timeout, leaving no process, temp file or shared
// memory segment behind.
//
// Run is the entry point; cmd/gorun only parses flags into a Spec. Run
// blocks until the job has ended and every rank has been reaped. Its result
// is the exit status gorun should return (see the Exit* constants) plus,
// for failures of gorun itself, an error.
//
// # Hosts and agents
//
// Spec.Hosts (-H, --hostfile, parsed by ParseHostList and ParseHostfile)
// lists where ranks run; plan.go maps ranks onto their slots (--map-by
// slot|node, oversubscription within max_slots; the programs of an MPMD
// job in order over the slots, as Open MPI maps its app contexts) and
// --bind-to core pins each rank to one CPU of its host before its first
// instruction.
//
// Every host, this one included, runs one agent (package launcher/agent)
// that forks that host's ranks and relays their stdio, control messages,
// state and exits, speaking the protocol of package launcher/agentproto;
// the launcher's side of each is an agentConn (agentconn.go), the same
// for every host. Backends differ only in how an agent starts:
//
//   - local.go: this host's agent runs in the launcher's own process, on
//     a goroutine, over a pair of pipes. A job with no host list, or only
//     localhost, never touches ssh and starts no process but its ranks.
//     Its ranks inherit gorun's environment, rank 0 gets gorun's stdin
//     file itself, and it is never declared lost for silence.
//   - sshagent.go, sshconn.go: one ssh connection per other host runs the
//     gorun binary in agent mode (agent.Main; copied into a per-user cache
//     on the host, verified by SHA-256, when the host lacks it, as are the
//     programs), all hosts in parallel, each within its connect timeout.
//     OpenSSH's config files (or --ssh-config), the ssh-agent, known_hosts
//     with changed keys refused.
//   - srun.go: inside a Slurm allocation, one srun step per node instead;
//     gorun and the programs must be on a shared file system.
//
// FindAllocation (slurm.go) reads Slurm's and PBS's allocations; cmd/gorun
// uses them when no host list is given.
//
// Files: run.go (the job, Run, cleanup), place.go (hosts, agents,
// mapping, binding), rankenv.go (each rank's environment), spawn.go
// (asking the agents for ranks, stdin), events.go (the event loop and its
// verdicts), stdio.go (output forwarding: whole lines, unfinished ones
// shown after a pause), agentconn.go (the launcher's side of an agent),
// local.go/sshagent.go/sshconn.go/srun.go (the backends), recovery.go
// (--enable-recovery), reaper.go (cleanup when gorun is killed).
//
// # Failures across hosts
//
// A rank's exit arrives from its agent, here as elsewhere. An agent's
// death ends its session. A frozen or cut-off host is found by memberlist (the seed's
// NotifyLeave) or by the agent's silent heartbeat; a rank the detector
// gives up on is dead only if its agent reports its process stopped. Each ends the job with one line
// naming the host and its ranks; meanwhile a rank's ordinary failure
// elsewhere is held briefly (verdictHold) so that the line names the rank
// that died, not one that noticed. An agent kills its ranks when the
// launcher goes away or falls silent, so no host is left with orphans.
//
// Goroutines: Run's own goroutine owns the job state (the event loop);
// the seed's callbacks and each host's reader only send events to it, and
// the event loop never blocks on an agent (agentConn.send queues).
//
// launcher must not import mpi, p2p, coll or btl; launcher/agent,
// launcher/agentproto and launcher/internal/hostinfo must not import
// launcher.
package launcher
