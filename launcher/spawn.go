package launcher

// Starting ranks: every rank through its host's agent, this host's
// included.

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorun/gorun/launcher/agentproto"
)

// spawn asks rank r's host agent to start it; the agent answers with a
// started event. Rank 0 gets gorun's stdin: the file itself from an agent
// in this process (directStdin), stdin frames from any other.
func (j *job) spawn(r int) {
	hs := j.hosts[j.lay.ranks[r].host]
	h := hs.agent
	p := &proc{rank: r, host: hs.name, hostIdx: h.idx, agent: h}
	if len(j.spec.Hosts) == 0 {
		p.host = j.host // no host list: name this host as it calls itself
	}
	j.procs[r] = p
	j.live++
	dir, _ := os.Getwd()
	stdin := r == 0 && j.spec.Stdin != nil
	app := j.appOf[r]
	m := &agentproto.Msg{Kind: agentproto.Spawn, Rank: r, Prog: h.progs[app], Args: j.apps[app].Args, Env: j.rankEnv(r, hs), Dir: dir, Bind: j.cpusOf(r), Stdin: stdin}
	if !h.send(m) {
		j.emit(event{kind: evAgentLost, host: h.idx, err: errors.New("its agent stopped reading")})
		return
	}
	if stdin && !h.directStdin {
		go j.forwardStdin(h)
	}
}

// stdinChunk is the largest chunk of gorun's stdin in one stdin frame.
const stdinChunk = 32 << 10

// forwardStdin sends gorun's stdin to rank 0's agent, then an empty frame
// for its end.
func (j *job) forwardStdin(h *agentConn) {
	buf := make([]byte, stdinChunk)
	for {
		if j.tty != nil && !j.foreground(h) {
			return
		}
		n, err := j.spec.Stdin.Read(buf)
		if n > 0 {
			select {
			case h.sendq <- &agentproto.Msg{Kind: agentproto.Stdin, Data: append([]byte(nil), buf[:n]...)}:
			case <-h.done:
				return
			case <-j.quit:
				return
			}
		}
		if err != nil {
			select {
			case h.sendq <- &agentproto.Msg{Kind: agentproto.Stdin}:
			case <-h.done:
			case <-j.quit:
			}
			return
		}
	}
}

// spawnErrCode maps a failure to start a program, as its agent reported
// it, to gorun's status.
func spawnErrCode(err error) int {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "bad interpreter"):
		return ExitNoExec // as a shell says 126 for it
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist), strings.Contains(msg, "no such file"):
		return ExitNotFound
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC), strings.Contains(msg, "permission denied"), strings.Contains(msg, "exec format error"):
		return ExitNoExec
	}
	return ExitInternal
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// foreground waits until gorun is in the foreground of its terminal j.tty,
// where it may read it (a read from the background would stop gorun with
// SIGTTIN: `gorun ... &` whose rank 0 never reads must run on); false if
// the job or h ended meanwhile.
func (j *job) foreground(h *agentConn) bool {
	for {
		fg, err := unix.IoctlGetInt(int(j.tty.Fd()), unix.TIOCGPGRP)
		if err != nil || fg == unix.Getpgrp() {
			return true // not this process's terminal after all: read it as a file
		}
		select {
		case <-h.done:
			return false
		case <-j.quit:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}
