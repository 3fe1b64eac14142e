//go:build cgo && ofi

package ofi

import (
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/internal/nap"
)

// Progress reads the completion queue (which also drives the provider's
// own progress: libfabric's manual progress model), posts receive buffers
// again, resumes what waited for send buffers or context slots, and now
// and then probes silent peers.
func (m *module) Progress() int {
	if m.closed {
		return 0
	}
	ev := 0
	for {
		n, text, err := m.f.poll(m.evs[:])
		if err != nil {
			logf("rank %d: %v", m.env.Rank, err)
			break
		}
		if n == 0 {
			break
		}
		for _, e := range m.evs[:n] {
			ev += m.complete(e, text)
		}
		if n < len(m.evs) {
			break
		}
	}
	if len(m.repost) > 0 {
		m.postReceives()
	}
	if len(m.busy) > 0 {
		m.resume()
	}
	if len(m.rmaQueue) > 0 {
		m.startQueued()
	}
	if m.ticks++; m.ticks&255 == 0 {
		m.probeSilent()
	}
	return ev
}

// complete handles one completion; it returns the events for Progress.
func (m *module) complete(e event, text string) int {
	var err error
	if e.err != 0 {
		err = fmt.Errorf("%s", text)
	}
	switch {
	case e.idx >= 0 && e.idx < nRecv:
		if err != nil {
			// A receive that failed (truncated: a peer sent more than a
			// buffer holds). Its source is unknown; post it again.
			if pVerbose() > 0 {
				logf("rank %d: receive failed: %v", m.env.Rank, err)
			}
		} else {
			m.receive(e.idx, e.len)
		}
		if r := m.f.postRecv(e.idx); r != 0 {
			m.repost = append(m.repost, e.idx)
		}
		return 1
	case e.idx >= nRecv && e.idx < nRecv+nSend:
		i := e.idx - nRecv
		s := m.tx[i]
		m.tx[i] = txSlot{}
		m.txFree = append(m.txFree, i)
		if s.p == nil {
			return 0 // failed and forgotten at Close
		}
		s.p.inflight--
		if s.probe {
			s.p.probing = false
		}
		if err != nil {
			s.p.fail(fmt.Errorf("send: %w", err))
		} else {
			s.p.heard = time.Now()
		}
		if s.frame != nil {
			s.frame.fragDone(err)
		}
		return 1
	case e.idx >= nRecv+nSend && e.idx < nRecv+nSend+nRMA:
		m.rmaComplete(e.idx-nRecv-nSend, err)
		return 1
	}
	logf("rank %d: completion with an unknown context %d (error %v)", m.env.Rank, e.idx, err)
	return 0
}

// postReceives posts again the receive buffers the provider refused.
func (m *module) postReceives() {
	for len(m.repost) > 0 {
		i := m.repost[len(m.repost)-1]
		if r := m.f.postRecv(i); r != 0 {
			return
		}
		m.repost = m.repost[:len(m.repost)-1]
	}
}

// resume pushes the queues of busy peers.
func (m *module) resume() {
	busy := m.busy
	m.busy = nil
	for _, p := range busy {
		p.onBusy = false
		p.push()
	}
}

// probeSilent probes the peers that the module waits on and that have
// been silent for GORUN_OFI_PROBE.
func (m *module) probeSilent() {
	now := time.Now()
	for _, p := range m.known {
		if p.failed == nil && !p.probing && p.business() && now.Sub(p.heard) > m.probe {
			p.heard = now
			p.sendProbe()
		}
		if p.failed == nil && !p.stuck.IsZero() && now.Sub(p.stuck) > m.connTimeout {
			p.fail(fmt.Errorf("unreachable: the provider refused every send for %v (%w)", m.connTimeout, os.ErrDeadlineExceeded))
		}
	}
}

// Wait sleeps on the completion queue's wait fd until a completion may be
// there or d has passed. A provider without a wait fd sleeps briefly.
func (m *module) Wait(d time.Duration) {
	if m.closed {
		return
	}
	m.probeSilent()
	if len(m.busy) > 0 || len(m.rmaQueue) > 0 || len(m.repost) > 0 {
		d = min(d, 20*time.Microsecond)
	}
	if m.f.wait(d.Nanoseconds()) < 0 {
		nap.Sleep(min(d, 50*time.Microsecond))
	}
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "gorun: ofi: "+format+"\n", a...)
}
