package launcher

// The job's event loop and its verdicts: joins, exits, deaths, lost hosts,
// timeouts and signals, each ending the job once with one message.

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

// verdict is a failure message with the status it gives gorun.
type verdict struct {
	code int
	msg  string
}

// verdictHold is how long, in a multi-host job, a rank's non-zero exit
// waits before it becomes the job's verdict: when a host dies, the ranks
// elsewhere often fail an operation with it and exit first; the line
// should name the rank that died, not one that noticed.
const verdictHold = 300 * time.Millisecond

// remoteGiveUp is how long after SIGKILL the launcher waits for remote
// hosts to report their ranks' exits before it stops waiting (a frozen
// host never will; its agent kills the ranks once it runs again and finds
// the launcher gone).
const remoteGiveUp = 300 * time.Millisecond

// localGiveUp is how long after SIGKILL the launcher waits for this
// host's ranks' exit reports. They come within milliseconds unless the
// agent's stream is stuck behind output nobody reads (gorun's stdout a
// pipe whose reader stopped): then gorun would never end.
const localGiveUp = 2 * time.Second

// loop handles events until every rank has been reaped.
func (j *job) loop() {
	defer close(j.quit)
	defer func() {
		// Every rank ended before a held verdict was due (all of them
		// failed at once): it is still the job's verdict.
		if j.held != nil && !j.ending {
			j.fail(j.held.code, j.held.msg)
		}
	}()
	for j.live > 0 {
		ev := <-j.events
		switch ev.kind {
		case evJoined:
			j.onJoin(ev)
		case evBadJoin:
			j.fail(ExitInternal, "gorun: "+ev.err.Error())
		case evDead:
			j.onDead(ev)
		case evCtl:
			p := j.procs[ev.rank]
			if p == nil {
				break
			}
			switch ev.msg.Kind {
			case boot.MsgFinalized:
				p.finalized = true
			case boot.MsgAbort:
				m := ev.msg
				p.abort = &m
			}
		case evRoster:
			if ev.err != nil {
				j.fail(ExitInternal, "gorun: wire-up failed: "+ev.err.Error())
			}
		case evExited:
			j.onExit(ev)
		case evStarted:
			j.onStarted(ev)
		case evAgentLost:
			j.onAgentLost(ev)
		case evVerdict:
			j.onVerdict()
		case evFT:
			j.onFT(ev.ft)
		case evState:
			if p := j.procs[ev.rank]; p != nil {
				p.stopped = ev.stopped
			}
		case evTimeout:
			if j.spec.StackTraces && !j.ending {
				j.dumpStacks(ExitTimeout, fmt.Sprintf("job exceeded --timeout %v", j.spec.Timeout))
				break
			}
			j.fail(ExitTimeout, fmt.Sprintf("gorun: job exceeded --timeout %v; stopping all ranks", j.spec.Timeout))
		case evBootTimeout:
			if j.joined < j.spec.NP {
				j.fail(ExitInternal, fmt.Sprintf("gorun: %s did not call mpi.Init within %v of the first rank that did; ending the job", j.missing(func(p *proc) bool { return !p.joined }), j.spec.BootTimeout))
			}
		case evSignal:
			s := ev.sig.(syscall.Signal)
			if s == syscall.SIGUSR1 || s == syscall.SIGUSR2 {
				if !j.ending {
					j.signalAll(s)
				}
				break
			}
			if s == syscall.SIGTSTP || s == syscall.SIGCONT {
				j.suspend(s == syscall.SIGTSTP)
				break
			}
			if s == syscall.SIGQUIT && !j.ending {
				// Ctrl-\: what a Go program does with it, for the whole
				// job: every rank's stacks, then the end (131).
				j.dumpStacks(ExitSignal+int(s), "received SIGQUIT")
				break
			}
			j.fail(ExitSignal+int(s), fmt.Sprintf("gorun: received %s; stopping all ranks", unix.SignalName(s)))
		case evClosed:
			// `gorun ... | head`: the reader is gone. End the job as a
			// pipeline would end its writer (status 141, 128+SIGPIPE),
			// but cleanly: ranks stopped, nothing left behind.
			j.fail(ExitSignal+int(syscall.SIGPIPE), "gorun: the output's reader went away (broken pipe); stopping all ranks")
		case evKill:
			j.signalAll(syscall.SIGKILL)
			if j.multi {
				j.after(remoteGiveUp, event{kind: evGiveUp})
			}
			j.after(localGiveUp, event{kind: evGiveUp, here: true})
		case evGiveUp:
			for _, hs := range j.hosts {
				if hs.here == ev.here && j.liveOn(hs) > 0 {
					j.loseHost(hs)
				}
			}
		}
	}
}

// onDead handles the failure detector's verdict on a rank: it has not
// answered for GORUN_MEMBER_SUSPICION. That alone does not make it dead:
// the authority is its process, whose state its agent reports (state
// frames, polled every GORUN_AGENT_HEARTBEAT, long before the detector
// gives up). A process that exited is reported as such; one that the
// kernel has stopped (SIGSTOP, a debugger) will never answer, and is
// failed now;
// one that runs is only busy (2 cores at load 8, a host loaded with CPU
// hogs: both had live ranks declared dead), and is left alone. A host
// that froze or was cut off is found by its agent's silence
// (GORUN_AGENT_TIMEOUT, agentconn.go watch), not here.
func (j *job) onDead(ev event) {
	if ev.rank < 0 || ev.rank >= len(j.procs) {
		return
	}
	p := j.procs[ev.rank]
	if p == nil || p.exited || p.finalized || j.ending || !p.stopped {
		return
	}
	const why = "is stopped (SIGSTOP or a debugger) and stopped answering the failure detector"
	if j.recov != nil {
		j.lose(p, ExitInternal, fmt.Sprintf("gorun: %s %s; killed", p, why))
		return
	}
	j.fail(ExitInternal, fmt.Sprintf("gorun: %s %s; ending the job", p, why))
}

// onVerdict gives a held verdict, unless by now a host or a rank is
// known to have failed: an agent that stopped answering (its host frozen
// or cut off) or a rank that the failure detector suspects.
func (j *job) onVerdict() {
	if j.held == nil || j.ending {
		return
	}
	stale := 6 * agentproto.Beat() // 600 ms: several beats missed, not one late under load
	for _, hs := range j.hosts {
		if hs.lost {
			continue
		}
		ranks := j.liveRanks(hs)
		if since := hs.agent.silentFor(); since > stale && len(ranks) > 0 {
			j.fail(ExitInternal, fmt.Sprintf("gorun: lost host %s with %s: its agent has not answered for %v (host frozen or cut off?)", hs.name, describeProcs(ranks, false), since.Round(10*time.Millisecond)))
			j.loseHost(hs)
			return
		}
	}
	// A suspect whose agent answers is busy, not the cause (onDead); one
	// whose agent has also missed a few beats is likely on a host that
	// is going (the agent's own timeout will say so later).
	for _, r := range j.seed.suspects() {
		if p := j.procs[r]; p != nil && !p.exited && !p.finalized && p.agent.silentFor() > 3*agentproto.Beat() {
			j.fail(ExitInternal, fmt.Sprintf("gorun: %s stopped responding: the failure detector suspects it (is %s frozen or cut off?)", p, p.host))
			j.loseHost(j.hosts[p.hostIdx])
			return
		}
	}
	j.fail(j.held.code, j.held.msg)
}

func (j *job) onStarted(ev event) {
	p := j.procs[ev.rank]
	if p == nil || p.exited {
		return
	}
	p.pid = ev.pid
	if ev.err != nil {
		p.exited = true
		j.live--
		j.fail(spawnErrCode(ev.err), fmt.Sprintf("gorun: cannot start rank %d on %s: %v", p.rank, p.host, ev.err))
		return
	}
	if j.started++; j.started == j.spec.NP {
		j.trace("all %d ranks started", j.started)
	}
}

// onAgentLost ends the job when a host's agent is gone while its ranks
// were still running.
func (j *job) onAgentLost(ev event) {
	hs := j.hosts[ev.host]
	if hs.lost {
		return
	}
	ranks := j.liveRanks(hs)
	j.loseHost(hs)
	if len(ranks) == 0 || j.ending {
		return
	}
	if j.recov != nil {
		for _, p := range ranks {
			j.lose(p, ExitInternal, fmt.Sprintf("gorun: lost host %s with %s: %v", hs.name, p, ev.err))
		}
		return
	}
	j.fail(ExitInternal, fmt.Sprintf("gorun: lost host %s with %s: %v", hs.name, describeProcs(ranks, false), ev.err))
}

// loseHost stops waiting for hs: its ranks count as gone, its connection
// is closed (the agent, if it ever runs again, kills them).
func (j *job) loseHost(hs *hostState) {
	hs.lost = true
	for _, p := range j.liveRanks(hs) {
		p.exited = true
		j.live--
	}
	go hs.agent.close(0)
}

// liveRanks are the ranks on hs that have not exited.
func (j *job) liveRanks(hs *hostState) []*proc {
	var ps []*proc
	for _, p := range j.procs {
		if p != nil && p.agent == hs.agent && !p.exited {
			ps = append(ps, p)
		}
	}
	return ps
}

func (j *job) liveOn(hs *hostState) int { return len(j.liveRanks(hs)) }

// describeProcs names ranks ps with their pids, and their hosts when
// withHost (a line about one host names it once itself).
func describeProcs(ps []*proc, withHost bool) string {
	var s []string
	for _, p := range ps {
		switch {
		case p.pid > 0 && withHost:
			s = append(s, p.String())
		case p.pid > 0:
			s = append(s, fmt.Sprintf("rank %d (pid %d)", p.rank, p.pid))
		case withHost:
			s = append(s, fmt.Sprintf("rank %d (not started yet on %s)", p.rank, p.host))
		default:
			s = append(s, fmt.Sprintf("rank %d", p.rank))
		}
	}
	return strings.Join(s, ", ")
}

func (j *job) onJoin(ev event) {
	p := j.procs[ev.rank]
	if p == nil || p.joined {
		return
	}
	p.joined = true
	j.cards[ev.rank] = ev.card
	j.joined++
	if j.joined == 1 {
		j.after(j.spec.BootTimeout, event{kind: evBootTimeout})
	}
	if j.checkInitMismatch() {
		return
	}
	if j.joined == j.spec.NP && !j.ending {
		j.trace("all %d ranks joined; pushing the roster", j.joined)
		cards := append([]boot.Card(nil), j.cards...)
		go func() { j.emit(event{kind: evRoster, err: j.seed.pushRoster(cards)}) }()
	}
}

// checkInitMismatch ends the job when some ranks wait in mpi.Init for a
// rank that exited without calling it.
func (j *job) checkInitMismatch() bool {
	if j.joined == 0 || j.ending {
		return false
	}
	for _, p := range j.procs {
		if p != nil && p.exited && !p.joined {
			j.fail(ExitInternal, fmt.Sprintf("gorun: %s exited without calling mpi.Init, while other ranks wait for it in mpi.Init", p))
			return true
		}
	}
	return false
}

func (j *job) onExit(ev event) {
	p := j.procs[ev.rank]
	if p == nil || p.exited {
		return // a lost host's rank, already counted
	}
	p.exited = true
	j.live--
	if j.ending {
		return
	}
	ws := ev.ws
	p.status = ws.ExitStatus()
	if j.recov != nil && p.abort == nil && p.joined {
		j.exitRecovering(p, ws)
		return
	}
	switch {
	case p.abort != nil:
		msg := fmt.Sprintf("gorun: %s called mpi.Abort(%d)", p, p.abort.Code)
		if p.abort.Text != "" {
			// Not a call of mpi.Abort: an error handler (its own line,
			// the error, came first).
			msg = fmt.Sprintf("gorun: %s ended the job: %s (status %d)", p, p.abort.Text, p.abort.Code)
		}
		j.fail(p.abort.Code, msg)
	case ws.Signaled():
		s := ws.Signal()
		j.fail(ExitSignal+int(s), fmt.Sprintf("gorun: %s was killed by signal %d (%s)", p, int(s), unix.SignalName(s)))
	case ws.ExitStatus() != 0:
		msg := fmt.Sprintf("gorun: %s exited with status %d", p, ws.ExitStatus())
		if j.multi {
			// Perhaps it only noticed another rank's death: let that
			// news arrive first.
			if j.held == nil {
				j.held = &verdict{ws.ExitStatus(), msg}
				j.after(verdictHold, event{kind: evVerdict})
			}
			return
		}
		j.fail(ws.ExitStatus(), msg)
	case p.joined && !p.finalized:
		j.fail(ExitInternal, fmt.Sprintf("gorun: %s exited with status 0 without calling mpi.Finalize", p))
	default:
		j.checkInitMismatch()
	}
}

// fail ends the job with code: one message, SIGTERM to every live rank's
// process group, SIGKILL after killGrace.
func (j *job) fail(code int, msg string) {
	if j.ending {
		return
	}
	j.ending = true
	j.held = nil
	j.code = code
	j.errOut.println(msg)
	j.signalAll(syscall.SIGTERM)
	j.after(killGrace, event{kind: evKill})
}

// stackGrace is how long ranks get to print their stacks after SIGQUIT
// before SIGKILL: a Go rank writes every goroutine's stack and exits in
// milliseconds; the rest is for the output to reach gorun from other
// hosts.
const stackGrace = 2 * time.Second

// dumpStacks ends the job with status code, saying why: SIGQUIT to
// every rank first (a --timeout that expired with --get-stack-traces, or
// a SIGQUIT to gorun: Ctrl-\). A Go program answers SIGQUIT by printing
// every goroutine's stack on stderr and exiting with status 2; that
// output is forwarded tagged with each line's rank ([1,RANK]<stderr>:,
// as --tag-output does). Any other program gets SIGQUIT's default action
// (it ends, with a core file where core dumps are enabled); attach a
// debugger for its stacks. SIGKILL follows after stackGrace.
func (j *job) dumpStacks(code int, why string) {
	j.ending = true
	j.held = nil
	j.code = code
	j.errOut.println("gorun: " + why + "; asking every rank for its stacks (SIGQUIT), then stopping all ranks")
	j.errOut.tagFromNow()
	j.signalAll(syscall.SIGQUIT)
	j.after(stackGrace, event{kind: evKill})
}

// signalAll sends sig to every live rank's process group, through the
// agent of each host that has one.
func (j *job) signalAll(sig syscall.Signal) {
	for _, hs := range j.hosts {
		if !hs.lost && j.liveOn(hs) > 0 {
			hs.agent.send(&agentproto.Msg{Kind: agentproto.Signal, Sig: int(sig)})
		}
	}
}

func (j *job) missing(pred func(*proc) bool) string {
	var ps []*proc
	for _, p := range j.procs {
		if p != nil && pred(p) {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(a, b int) bool { return ps[a].rank < ps[b].rank })
	if len(ps) <= 4 {
		// Few: each with its pid and host, as every other line names a
		// rank, so that the user can look at the process.
		return describeProcs(ps, true)
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p.rank)
	}
	return "ranks " + strings.Join(s, ", ")
}

// suspend handles Ctrl-Z (SIGTSTP) and the shell's fg or bg after it
// (SIGCONT): the ranks run in process groups of their own, which the
// terminal's SIGTSTP does not reach, so gorun stops them (SIGSTOP to each
// rank's group, at once, from here) before it stops itself, and continues
// them when it is continued. A job across hosts is not stopped: its remote
// agents would take a stopped launcher for a lost one and end their ranks.
func (j *job) suspend(stop bool) {
	if j.ending {
		return
	}
	if j.multi {
		if stop {
			j.errOut.println("gorun: Ctrl-Z (SIGTSTP) ignored: a job across hosts cannot be stopped (its hosts' agents would take gorun for lost)")
		}
		return
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	for _, p := range j.procs {
		if p != nil && !p.exited && p.pid > 0 {
			syscall.Kill(-p.pid, sig)
		}
	}
	if stop {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
}
