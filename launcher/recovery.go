package launcher

import (
	"fmt"
	"slices"
	"syscall"

	"github.com/gorun/gorun/launcher/agentproto"
	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

// Recovery (Spec.Recovery, gorun --enable-recovery): a rank that fails
// does not end the job. The launcher declares it failed once (lose), kills
// what is left of it on this host, tells every other rank, and answers the
// ranks' agreements (package mpi's Agree, Shrink, Revoke; the protocol is
// in launcher/boot/recovery.go). The job ends when every rank has ended;
// its status is the first non-zero status of a rank that finalized, else
// 0 if any rank finalized, else the first lost rank's.

// recovery is the launcher's state for Spec.Recovery.
type recovery struct {
	lost     map[int]bool
	lostCode int // status of the first lost rank
	agrees   map[string]*agreement
}

// agreement is one agreement in progress: the contributions so far.
type agreement struct {
	op      string
	members []int
	words   []uint64
	got     map[int]bool
}

func newRecovery() *recovery {
	return &recovery{lost: map[int]bool{}, agrees: map[string]*agreement{}}
}

// lose declares p failed: the job goes on without it. code is the status
// the job ends with if no rank finalizes.
func (j *job) lose(p *proc, code int, msg string) {
	rc := j.recov
	if rc.lost[p.rank] {
		return
	}
	if len(rc.lost) == 0 {
		rc.lostCode = code
	}
	rc.lost[p.rank] = true
	j.errOut.println(msg + "; the job goes on without it (--enable-recovery)")
	// Fail-stop: a stopped or silent rank must not come back.
	if !p.exited && !j.hosts[p.hostIdx].lost {
		p.agent.send(&agentproto.Msg{Kind: agentproto.Kill, Rank: p.rank})
	}
	note := boot.FTMsg{Kind: boot.FTFailed, Rank: p.rank, Text: msg}
	for _, q := range j.procs {
		if q != nil && q != p && q.joined && !q.exited && !rc.lost[q.rank] {
			j.seed.sendFT(q.rank, note)
		}
	}
	j.settle()
}

// onFT handles a recovery message from a rank.
func (j *job) onFT(m boot.FTMsg) {
	rc := j.recov
	if rc == nil || m.Rank < 0 || m.Rank >= len(j.procs) {
		return
	}
	switch m.Kind {
	case boot.FTRevoke:
		note := boot.FTMsg{Kind: boot.FTRevoked, Ctx: m.Ctx}
		for _, r := range m.Members {
			if r >= 0 && r < len(j.procs) && r != m.Rank && !rc.lost[r] {
				j.seed.sendFT(r, note)
			}
		}
	case boot.FTAgree:
		if rc.lost[m.Rank] {
			return // its words do not count, and it gets no answer
		}
		a := rc.agrees[m.Key]
		if a == nil {
			a = &agreement{op: m.Text, members: slices.Clone(m.Members), words: slices.Clone(m.Words), got: map[int]bool{}}
			rc.agrees[m.Key] = a
		} else {
			if !slices.Equal(a.members, m.Members) || len(a.words) != len(m.Words) || a.op != m.Text {
				j.fail(ExitInternal, fmt.Sprintf("gorun: rank %d called %s where another rank called %s (agreement %s; members or sizes may differ too): collective calls on one communicator in different orders", m.Rank, m.Text, a.op, m.Key))
				return
			}
			for i, w := range m.Words {
				a.words[i] &= w
			}
		}
		a.got[m.Rank] = true
		j.settle()
	}
}

// settle answers every agreement whose members have all contributed or
// failed.
func (j *job) settle() {
	rc := j.recov
	for key, a := range rc.agrees {
		var failed []int
		done := true
		for _, r := range a.members {
			switch {
			case r < 0 || r >= len(j.procs):
			case rc.lost[r]:
				failed = append(failed, r)
			case !a.got[r] && !j.procs[r].exited:
				done = false
			}
		}
		if !done {
			continue
		}
		delete(rc.agrees, key)
		slices.Sort(failed)
		ans := boot.FTMsg{Kind: boot.FTAgreed, Key: key, Words: a.words, Failed: failed}
		for r := range a.got {
			if !rc.lost[r] {
				j.seed.sendFT(r, ans)
			}
		}
	}
}

// recoveryCode is the job's status at the end under Spec.Recovery.
func (j *job) recoveryCode() int {
	rc := j.recov
	anyDone := false
	for _, p := range j.procs {
		if p != nil && p.finalized && !rc.lost[p.rank] {
			anyDone = true
			if p.status != 0 {
				return p.status
			}
		}
	}
	if !anyDone && len(rc.lost) > 0 {
		return rc.lostCode
	}
	return 0
}

// exitRecovering handles the exit of a rank that joined, under
// Spec.Recovery (mpi.Abort, and a rank that fails before mpi.Init, still
// end the job): one that ends without Finalize is lost, and the others go
// on.
func (j *job) exitRecovering(p *proc, ws syscall.WaitStatus) {
	defer j.settle()
	switch {
	case j.recov.lost[p.rank]:
	case p.finalized && ws.Signaled():
		j.errOut.println(fmt.Sprintf("gorun: %s was killed by signal %d (%s) after mpi.Finalize", p, int(ws.Signal()), unix.SignalName(ws.Signal())))
		p.status = ExitSignal + int(ws.Signal())
	case ws.Signaled():
		s := ws.Signal()
		j.lose(p, ExitSignal+int(s), fmt.Sprintf("gorun: %s was killed by signal %d (%s)", p, int(s), unix.SignalName(s)))
	case !p.finalized:
		code := ws.ExitStatus()
		if code == 0 {
			code = ExitInternal
		}
		j.lose(p, code, fmt.Sprintf("gorun: %s exited with status %d without calling mpi.Finalize", p, ws.ExitStatus()))
	case ws.ExitStatus() != 0: // finalized
		j.errOut.println(fmt.Sprintf("gorun: %s exited with status %d after mpi.Finalize", p, ws.ExitStatus()))
	}
}
