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
// # Hosts
//
// Spec.Hosts (-H, --hostfile, parsed by ParseHostList and ParseHostfile)
// lists where ranks run; plan.go maps ranks onto their slots (--map-by
// slot|node, oversubscription within max_slots) and --bind-to core pins
// each rank to one CPU of its host before its first instruction. Ranks on
// this host are started directly, exactly as in a local job: a job with no
// host list, or only localhost, never touches ssh.
//
// Every other host is reached over ssh (sshconn.go: OpenSSH's config files
// or --ssh-config, the ssh-agent, known_hosts with changed keys refused),
// all hosts in parallel, each within its connect timeout. One ssh
// connection per host runs one agent, the gorun binary itself in agent
// mode (RunAgent; copied into a per-user cache on the host, verified by
// SHA-256, when the host lacks it), which forks that host's ranks and
// relays their stdio, control messages and exits over the session
// (agentproto.go documents the frames).
//
// Inside a Slurm allocation the agents may instead be started by srun, one
// step per node (srun.go); everything after the start is the same stream.
// FindAllocation (slurm.go) reads Slurm's and PBS's allocations; cmd/gorun
// uses them when no host list is given.
//
// Files: run.go (the job, Run, cleanup), place.go (hosts, mapping,
// binding), rankenv.go (each rank's environment), spawn.go (starting
// ranks), events.go (the event loop and its verdicts), stdio.go (output
// forwarding: whole lines, unfinished ones shown after a pause),
// remote.go/sshconn.go/srun.go (reaching hosts), agent.go and
// agentproto.go (the agent and its protocol).
//
// Not done yet (issue 13, item 1): ranks on the launcher's own host are
// started directly (spawn), not through an agent speaking the same
// protocol, so "local or remote" is still a branch in spawn.go,
// events.go and run.go.
//
// # Failures across hosts
//
// A remote rank's exit arrives from its agent. An agent's death ends its
// session. A frozen or cut-off host is found by memberlist (the seed's
// NotifyLeave, ignored for ranks on this host whose exit is authoritative)
// or by the agent's silent heartbeat. Each ends the job with one line
// naming the host and its ranks; meanwhile a rank's ordinary failure
// elsewhere is held briefly (verdictHold) so that the line names the rank
// that died, not one that noticed. An agent kills its ranks when the
// launcher goes away or falls silent, so no host is left with orphans.
//
// Goroutines: Run's own goroutine owns the job state (the event loop);
// the seed's callbacks, local waiters and each host's reader only send
// events to it.
//
// launcher must not import mpi, p2p, coll or btl.
package launcher
