// Package agent is the per-host side of a gorun job: it starts the ranks
// of one host as the launcher asks and relays their output, control
// messages, state and exits back, speaking launcher/agentproto over one
// byte stream each way.
//
// Every host of a job runs one agent, the launcher's own host included;
// only the start differs (package launcher picks the backend):
//
//   - on the launcher's host, Serve runs on a goroutine of the launcher's
//     process over a pair of pipes (no process to start: launch time is
//     that of the ranks alone), with Options.Addr the launcher's own
//     address and Options.Stdin the launcher's stdin;
//   - on other hosts, the gorun binary runs Main (gorun --agent ...) in an
//     ssh session or an srun step, the stream on its stdin and stdout.
//
// A rank is a child process in a process group of its own (signals reach
// what it starts too), with Pdeathsig SIGKILL (it dies with the agent's
// thread that forked it), its stdout and stderr on pipes the agent reads
// in chunks of relayBuf, and its end of a control socket (fd 3) on which
// the agent first writes the job secret (never argv or the environment).
// Binding: the agent sets the forking thread's affinity to the spawn's
// Bind around the fork, so the rank is bound before its first
// instruction. Only a rank spawned with Stdin (rank 0) gets stdin; the
// others get /dev/null, as under mpirun.
//
// Goroutines: Serve's caller waits for the end; one goroutine reads the
// launcher's frames (and forks the ranks, in order), one sends heartbeats
// and polls the ranks' process state, and each rank has two output
// relays, a control reader and a waiter. Frames to the launcher are
// serialized by one lock; a writer blocked on a launcher that does not
// read never stops the silence check. Nothing is buffered without bound
// except stdin for a rank that does not read it (byteQueue), so that the
// reader never blocks the heartbeats.
//
// Ending: the launcher's bye, the end or silence of its stream, or the
// caller's stop channel SIGKILL every rank's process group, wait for them
// (reapWait at most) and remove the job's /dev/shm segments on this host.
//
// agent must not import mpi, p2p, coll or btl, nor the launcher (which
// imports it).
package agent
