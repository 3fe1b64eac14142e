package launcher

// Starting ranks: here directly, elsewhere through the host's agent.

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gorun/gorun/launcher/boot"
)

// spawnRemote asks rank r's host agent to start it; the agent answers
// with a started event.
func (j *job) spawnRemote(r int, hs *hostState) {
	h := hs.remote
	p := &proc{rank: r, host: hs.name, hostIdx: h.idx, remote: h}
	j.procs[r] = p
	j.live++
	dir, _ := os.Getwd()
	stdin := r == 0 && j.spec.Stdin != nil
	m := &agentMsg{Kind: "spawn", Rank: r, Prog: h.prog, Args: j.apps[j.appOf[r]].Args, Env: j.rankEnv(r, forwardedEnv()), Dir: dir, Bind: j.cpusOf(r), Stdin: stdin}
	if !h.send(m) {
		j.emit(event{kind: evAgentLost, host: h.idx, err: errors.New("its agent stopped reading")})
		return
	}
	if stdin {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := j.spec.Stdin.Read(buf)
				if n > 0 {
					select {
					case h.sendq <- &agentMsg{Kind: "stdin", Data: append([]byte(nil), buf[:n]...)}:
					case <-h.done:
						return
					case <-j.quit:
						return
					}
				}
				if err != nil {
					select {
					case h.sendq <- &agentMsg{Kind: "stdin"}:
					case <-h.done:
					case <-j.quit:
					}
					return
				}
			}
		}()
	}
}

// spawn starts local rank r with its stdio pipes and control socket.
func (j *job) spawn(r int) error {
	p := &proc{rank: r, host: j.host, hostIdx: j.lay.ranks[r].host}
	if len(j.spec.Hosts) > 0 {
		p.host = j.hosts[p.hostIdx].name
	}
	ctl, ctlRank, err := boot.CtlPair()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return err
	}
	app := j.apps[j.appOf[r]]
	cmd := exec.Command(j.progs[j.appOf[r]], app.Args...)
	cmd.Env = j.rankEnv(r, os.Environ())
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{ctlRank}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdinW *os.File
	if r == 0 && j.spec.Stdin != nil {
		if f, ok := j.spec.Stdin.(*os.File); ok {
			cmd.Stdin = f
		} else {
			var inR *os.File
			inR, stdinW, err = os.Pipe()
			if err != nil {
				return err
			}
			cmd.Stdin = inR
			defer inR.Close()
		}
	}
	err = startBound(cmd, j.cpusOf(r))
	outW.Close()
	errW.Close()
	ctlRank.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		ctl.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return err
	}
	if stdinW != nil {
		go func() { io.Copy(stdinW, j.spec.Stdin); stdinW.Close() }()
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	j.procs[r] = p
	j.live++
	j.stdio.Add(2)
	go func() { defer j.stdio.Done(); j.out.forward(r, "stdout", outR); outR.Close() }()
	go func() { defer j.stdio.Done(); j.errOut.forward(r, "stderr", errR); errR.Close() }()
	boot.WriteCtl(ctl, boot.CtlMsg{Kind: boot.MsgHello, Secret: j.secret})
	ctlDone := make(chan struct{})
	go j.readCtl(r, ctl, ctlDone)
	go func() {
		cmd.Wait()
		// Deliver the rank's last control messages (Finalized, Abort)
		// before its exit; a grandchild holding the socket open must not
		// delay the verdict long.
		select {
		case <-ctlDone:
		case <-time.After(200 * time.Millisecond):
		}
		ctl.Close()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		j.emit(event{kind: evExited, rank: r, ws: ws})
	}()
	return nil
}

func (j *job) readCtl(r int, c net.Conn, done chan struct{}) {
	defer close(done)
	for {
		m, err := boot.ReadCtl(c)
		if err != nil {
			return
		}
		j.emit(event{kind: evCtl, rank: r, msg: m})
	}
}

// spawnErrCode maps a failure to start a program to gorun's status.
func spawnErrCode(err error) int {
	msg := err.Error()
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist), strings.Contains(msg, "no such file"):
		return ExitNotFound
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC), strings.Contains(msg, "permission denied"), strings.Contains(msg, "exec format error"):
		return ExitNoExec
	}
	return ExitInternal
}
