package launcher

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Agents started by Slurm's srun: inside an allocation gorun starts one
// agent per node with `srun --nodes=1 --ntasks=1 --ntasks-per-node=1
// --nodelist=NODE --overlap ...`, whose stdin and stdout carry the agent
// protocol exactly as an ssh session's do. One srun per node, not one for
// all: srun merges its tasks' stdout and gives stdin to one task, and the
// protocol needs a stream per agent. gorun and the program must be at the
// same path on every node (a shared file system): unlike ssh, srun gives
// no way to copy them first.

// srunProc is an agent started by srun.
type srunProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when srun has exited; err is then set
	err  error
}

func (p *srunProc) exitReason(d time.Duration, streamErr error) string {
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return "srun was killed by signal " + ws.Signal().String()
			}
			return fmt.Sprintf("srun (the agent's step) exited with status %d", ee.ExitCode())
		}
		return "the agent exited"
	case <-time.After(d):
		return "srun's stream ended (" + streamErr.Error() + ")"
	}
}

// kill ends the step: srun forwards SIGTERM to the agent, which kills its
// ranks; SIGKILL follows if srun is still there after killGrace.
func (p *srunProc) kill() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(killGrace):
			p.cmd.Process.Kill()
		}
	}()
}

// connectSrun starts the agent of node name with srun and reads its hello.
// cpus, when known (SLURM_JOB_CPUS_PER_NODE), is the node's share of the
// allocation, given to the step so that its ranks are not confined to the
// one CPU of a default task.
func connectSrun(cfg *agentConfig, name string, idx, cpus int, timeout time.Duration, trace func(string, ...any)) (*agentConn, error) {
	args := []string{"--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=" + name, "--overlap", "--cpu-bind=none", "--kill-on-bad-exit=1", "--quiet"}
	if cpus > 0 {
		args = append(args, "--cpus-per-task="+strconv.Itoa(cpus))
	}
	args = append(args, cfg.gorun)
	cmd := exec.Command(cfg.srun, append(args, agentArgv(cfg)...)...)
	h := newAgentConn(name, idx)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = h.agentLog(cfg.stderr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start srun: %w", err)
	}
	p := &srunProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.proc = p
	trace("%s: srun started", name)
	br := bufio.NewReaderSize(out, 64<<10)
	m, err := readHello(br, timeout)
	if errors.Is(err, errNoHello) {
		p.kill()
		return nil, fmt.Errorf("the agent started by srun did not answer within %v", timeout)
	}
	if err != nil {
		reason := p.exitReason(time.Second, err)
		if tail := h.errTail.String(); tail != "" {
			reason += ": " + lastLine(tail)
		}
		p.kill()
		return nil, fmt.Errorf("the agent failed to start with srun: %s", reason)
	}
	if err := checkHello(m, len(cfg.progs)); err != nil {
		p.kill()
		return nil, err
	}
	h.in, h.out, h.hello = in, br, m
	h.from = sourceAddrTo(m.Addr)
	trace("%s: agent said hello (its ranks at %s, reached from %v)", name, m.Addr, h.from)
	h.startBeats()
	if h.hello.Err != "" {
		h.close(0)
		return nil, errors.New(h.hello.Err)
	}
	h.copyWhy = "agents started by srun need gorun and the programs at the same path on a shared file system"
	return h, nil
}

// sourceAddrTo is the address of this host that the kernel would send
// from to reach addr (a UDP "connection" sends nothing), or nil: with no
// ssh connection to learn it from, this is where the launcher's seed
// listens for the ranks of srun-started agents.
func sourceAddrTo(addr string) net.IP {
	if net.ParseIP(addr) == nil {
		return nil
	}
	c, err := net.Dial("udp", net.JoinHostPort(addr, "9"))
	if err != nil {
		return nil
	}
	defer c.Close()
	if u, ok := c.LocalAddr().(*net.UDPAddr); ok {
		return u.IP
	}
	return nil
}
