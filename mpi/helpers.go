package mpi

import "sync"

// helperPool runs the goroutines of nonblocking calls (launch): a
// goroutine that has finished its call parks for the next one instead of
// exiting. A new goroutine's stack starts small and the runtime copied it
// each time a call's algorithm grew it, and its start allocated: about
// a fifth of an Ibarrier+Wait on one rank (perf on the 2-core VM).
type helperPool struct {
	mu     sync.Mutex
	parked []*helper // last parked first: its stack and lines are warm
	closed bool
}

// helper is one pooled goroutine; it takes its next call from job, and
// exits when job is closed.
type helper struct{ job chan job }

// job is a call a helper runs (an *nbCall).
type job interface{ work() }

// maxParked bounds the parked helpers: more calls than that in flight at
// once start goroutines that exit when done.
const maxParked = 16

// run runs f in a parked helper, or in a new one.
func (p *helperPool) run(f job) {
	p.mu.Lock()
	if n := len(p.parked); n > 0 {
		h := p.parked[n-1]
		p.parked[n-1] = nil
		p.parked = p.parked[:n-1]
		p.mu.Unlock()
		h.job <- f // buffered: never blocks
		return
	}
	p.mu.Unlock()
	h := &helper{job: make(chan job, 1)}
	go h.loop(p, f)
}

// loop runs f and then each call it is handed while parked.
func (h *helper) loop(p *helperPool, f job) {
	for f != nil {
		f.work()
		f = nil
		p.mu.Lock()
		if p.closed || len(p.parked) == maxParked {
			p.mu.Unlock()
			return
		}
		p.parked = append(p.parked, h)
		p.mu.Unlock()
		f = <-h.job // nil once closed
	}
}

// close lets the parked helpers exit, and those still running exit when
// done.
func (p *helperPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, h := range p.parked {
		close(h.job)
	}
	p.parked = nil
}
