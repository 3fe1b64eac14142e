package launcher

// The local backend: the agent of the launcher's own host runs in the
// launcher's process, on a goroutine, over a pair of pipes. It speaks the
// same protocol as the agents of other hosts, so a rank here is started,
// relayed, signalled and reaped by the same code as one elsewhere; what
// it saves is a process start (a Go binary cost launches 16 ms, reaper.go)
// and a hop.

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gorun/gorun/launcher/agent"
)

// localProc is an agent in the launcher's process.
type localProc struct {
	stop   chan struct{} // closed by kill: the agent ends
	once   sync.Once
	served chan struct{} // closed when Serve has returned
	toW    *os.File      // the launcher's end of the stream to the agent
	fromR  *os.File      // the launcher's end of the stream from the agent
}

func (p *localProc) exitReason(d time.Duration, streamErr error) string {
	select {
	case <-p.served:
		return "the agent in gorun's own process ended (" + streamErr.Error() + ")"
	case <-time.After(d):
		return "the stream of the agent in gorun's own process broke (" + streamErr.Error() + ")"
	}
}

// localKillWait bounds kill's wait for the agent: its own wait for its
// ranks (reaping them after SIGKILL takes at most about a second, for one
// in uninterruptible sleep), and a little more.
const localKillWait = 1500 * time.Millisecond

// kill ends the agent (it kills and reaps its ranks) and waits, bounded,
// for it; then it closes the launcher's ends of the stream.
func (p *localProc) kill() {
	p.once.Do(func() { close(p.stop) })
	p.toW.Close()
	select {
	case <-p.served:
	case <-time.After(localKillWait):
	}
	p.fromR.Close()
}

// startLocal starts the agent of the launcher's own host name in this
// process; its ranks listen on addr. With stdin, rank 0 gets that file
// itself rather than stdin frames.
func startLocal(cfg *agentConfig, name string, idx int, addr string, stdin *os.File) (*agentConn, error) {
	toR, toW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe to the local agent: %w", err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		toR.Close()
		toW.Close()
		return nil, fmt.Errorf("pipe from the local agent: %w", err)
	}
	h := newAgentConn(name, idx)
	h.inProcess, h.directStdin = true, stdin != nil
	h.copyWhy = "it changed while gorun started"
	p := &localProc{stop: make(chan struct{}), served: make(chan struct{}), toW: toW, fromR: fromR}
	h.proc = p
	opt := agent.Options{Progs: cfg.progs, ProgIDs: cfg.progIDs, Addr: addr, Stdin: stdin, Log: h.agentLog(cfg.stderr)}
	go func() {
		agent.Serve(toR, fromW, opt, p.stop)
		toR.Close() // ends the agent's reader, if the launcher's end is still open
		close(p.served)
	}()
	h.in, h.out = toW, bufio.NewReaderSize(fromR, 64<<10)
	m, err := readHello(h.out, localHelloWait)
	if err == nil {
		err = checkHello(m, len(cfg.progs))
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("the agent in gorun's own process: %w", err)
	}
	h.hello = m
	h.startBeats()
	return h, nil
}

// localHelloWait bounds the wait for the in-process agent's hello, which
// takes microseconds: only a bug would exceed it.
const localHelloWait = 10 * time.Second
