package sm

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"sync/atomic"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/shmseg"
	"golang.org/x/sys/unix"
)

func init() { btl.Register("sm", component{}) }

type component struct{}

func (component) Open(env btl.Env) (btl.Module, error) {
	if !validJob(env.JobID) {
		return nil, fmt.Errorf("sm: rank %d: job id %q cannot name a segment", env.Rank, env.JobID)
	}
	expect := -1 // unknown placement: Close unlinks
	if n := env.LocalSize; n >= 1 {
		if n == 1 {
			return nil, fmt.Errorf("sm: rank %d: no other rank on this host", env.Rank)
		}
		expect = n - 1
	}
	// The tunables' values are checked where they are read (params.go):
	// one out of bounds is ignored with a warning, not a transport that
	// fails to open.
	slots, userSlots := pSlots()
	frag, userFrag := pFrag()
	slots, frag = shapeRings(env, slots, frag, userSlots || userFrag)
	eager, _ := pEager()
	allowPeerReads()
	own, err := create(segName(env.JobID, env.Rank), env.Size, slots, frag)
	if err != nil {
		return nil, fmt.Errorf("sm: rank %d: %w", env.Rank, err)
	}
	m := &module{env: env, own: own, peers: make([]*peer, env.Size), expect: expect,
		eager: eager, addr: []byte(own.path), frag: fragCap(slotStride(frag)), bellAfter: pBellAfter()}
	m.whole, _ = env.Handler.(btl.WholeHandler)
	for w := range bellWords(env.Size) {
		m.bells = append(m.bells, u64(own.ctl, offBell(env.Size)+8*w))
	}
	if m.bellAfter <= 0 {
		m.bellOn = true
		atomic.StoreUint32(u32(own.ctl, offBellOn), 1)
	}
	m.singleCopyInit()
	return m, nil
}

// shapeRings fits the ring shape to /dev/shm's free space: the rings of
// the host's ranks, were every pair to talk, take at most a ringShare of
// it (fitRing), instead of pairs failing to reach each other through
// shared memory once it is full (a container's 64 MiB held the 1 MiB
// rings of 8 ranks, not 16). A shape the user set (user: GORUN_SM_SLOTS
// or GORUN_SM_FRAG_SIZE given a value taken, not one that params ignored
// and replaced by the default) is kept. Local rank 0 says so when the
// rings are cut: one line a host.
func shapeRings(env btl.Env, slots, frag int, user bool) (int, int) {
	if user {
		return slots, frag
	}
	free, local := shmseg.Free(), env.LocalSize
	if local < 2 {
		local = env.Size // unknown placement: every rank may be here
	}
	if free == math.MaxInt || local < 2 {
		return slots, frag
	}
	pairs := local * (local - 1)
	s, f := fitRing(slots, frag, free/ringShare/pairs)
	if (s != slots || f != frag) && speaksForHost(env) {
		want := roundUp(ringShare*pairs*ringBytes(slots, frag), 64<<20) >> 20
		fmt.Fprintf(os.Stderr, "gorun: sm: %s has %.1f MiB free for %d ranks on this host: their rings take %d KiB each (%d records of up to %d KiB) instead of %d KiB; with %d MiB free (docker run --shm-size=%dm) they get their full size\n",
			shmseg.Dir, float64(free)/(1<<20), local, ringBytes(s, f)>>10, s, f>>10, ringBytes(slots, frag)>>10, want, want)
	}
	return s, f
}

// speaksForHost reports whether this rank prints what holds for every
// rank of its host (one line a host, not one a rank): local rank 0, or
// rank 0 where the placement is unknown.
func speaksForHost(env btl.Env) bool {
	return env.LocalRank == 0 && (env.LocalSize > 0 || env.Rank == 0)
}

// module is one rank's shared-memory transport.
type module struct {
	env   btl.Env
	whole btl.WholeHandler // env.Handler, when it takes whole frames
	own   *segment
	addr  []byte
	eager int
	frag  int     // Caps.MaxFrag: payload of a full slot
	peers []*peer // by world rank, created on first contact
	in    []*inRing
	busy  []*outRing // endpoints with queued frames
	nseen uint32     // registry entries adopted
	// Doorbell (doc.go): once more than bellAfter senders registered,
	// bellOn; then Progress polls only hot, the rings whose bit rang and
	// those not drained yet.
	bellAfter int
	bellOn    bool
	bells     []*uint64 // own doorbell words
	hot       []*inRing
	waits     uint64 // Wait calls, so that stalled reads the clock after one
	polls     uint64 // Progress calls: a ring demotes its next record after one (publish)
	// expect is how many local peers will open own before it may be
	// unlinked; -1 when unknown (then Close unlinks it).
	expect   int
	unlinked bool
	deadIn   bool // some inRing of a failed peer awaits removal from in
	closed   bool
	noCopy   string // why single copy is off, "" if it is not
	fullSaid bool   // a ring that /dev/shm could not hold was reported
	// saidNoCopy: single copy's refusal was reported (once a module).
	saidNoCopy bool
}

var (
	_ btl.Module  = (*module)(nil)
	_ btl.Waiter  = (*module)(nil)
	_ btl.RMA     = (*module)(nil)
	_ btl.Checker = (*module)(nil)
)

// peer is what this module knows of another local rank.
type peer struct {
	rank  int
	pid   int
	seg   *segment // its receive segment, once opened
	in    *inRing  // what it sends here
	out   *outRing // where this rank sends to it
	err   error    // set once it failed
	pidfd int      // -1 until opened, -2 where pidfds are unavailable
	next  int64    // next liveness check, monotonic ns
	// stalls counts polls without progress; waits is m.waits when the
	// clock was last read (stalled).
	stalls uint32
	waits  uint64
	cma    int8 // single copy: 0 not probed, 1 works, -1 refused
}

func (m *module) Name() string    { return "sm" }
func (m *module) Address() []byte { return m.addr }

func (m *module) Caps() btl.Caps {
	return btl.Caps{EagerLimit: m.eager, MaxFrag: m.frag, Exclusivity: btl.ExclusivitySM, Flags: btl.FlagSendInPlace}
}

func (m *module) peer(rank int) *peer {
	p := m.peers[rank]
	if p == nil {
		p = &peer{rank: rank, pidfd: -1}
		m.peers[rank] = p
	}
	return p
}

// open opens p's segment once; the descriptor serves every later mapping.
// Each module that opens a segment counts itself in the segment's opened
// word, which is how the owner knows when it may unlink.
func (m *module) open(p *peer, path string) error {
	if p.seg != nil {
		return nil
	}
	s, err := attach(path, m.env.Size)
	if err != nil {
		return err
	}
	p.seg = s
	if p.pid == 0 {
		p.pid = s.pid
	}
	atomic.AddUint32(u32(s.ctl, offOpened), 1)
	return nil
}

// Reach returns the ring into p's segment, creating it on first use: the
// ring's memory is allocated (shmseg.Back, so a full /dev/shm is an error
// here rather than a SIGBUS later), this rank's pid written and its rank
// registered for p to poll. Peers on other hosts, and peers whose segment
// cannot be opened or backed, are not reached (nil, nil), so that the next
// transport (tcp) takes them.
func (m *module) Reach(bp btl.Peer) (btl.Endpoint, error) {
	if m.closed {
		return nil, btl.ErrClosed
	}
	if bp.Rank == m.env.Rank || bp.Rank < 0 || bp.Rank >= m.env.Size || bp.HostID != m.env.HostID {
		return nil, nil
	}
	a := bp.Addrs["sm"]
	if len(a) == 0 {
		return nil, nil
	}
	p := m.peer(bp.Rank)
	if p.out != nil {
		return p.out, nil
	}
	if p.err != nil {
		return nil, nil
	}
	// The name is derived, never taken from the card: it must be the
	// peer's segment in this job.
	path := segName(m.env.JobID, bp.Rank)
	if string(a) != path {
		return nil, fmt.Errorf("sm: reach rank %d: it publishes %q, expected %q", bp.Rank, a, path)
	}
	if p.seg == nil {
		if err := m.open(p, path); err != nil {
			// Same host id but no segment to be seen: not this host's
			// memory after all.
			return nil, nil
		}
	}
	if bp.PID != 0 && p.seg.pid != bp.PID {
		return nil, nil // somebody else's file under that name
	}
	if bp.PID != 0 {
		p.pid = bp.PID
	}
	mem, err := p.seg.mapRing(m.env.Rank, true)
	if err != nil {
		// Said once a rank: a full /dev/shm refuses pairs by the hundred.
		if !m.fullSaid {
			m.fullSaid = true
			fmt.Fprintf(os.Stderr, "gorun: sm: rank %d: reach rank %d: %v (using the next transport, for this pair and any other of this rank's that does not fit)\n", m.env.Rank, bp.Rank, err)
		}
		return nil, nil
	}
	atomic.StoreUint32(u32(mem, offProdPID), uint32(os.Getpid()))
	idx := atomic.AddUint32(u32(p.seg.ctl, offNReg), 1) - 1
	if int(idx) >= m.env.Size {
		unix.Munmap(mem)
		// Give the ring's memory back: nothing will use it.
		shmseg.Unback(p.seg.fd, p.seg.ringOff(m.env.Rank), p.seg.ringSize)
		return nil, fmt.Errorf("sm: reach rank %d: its registry is full (%d entries)", bp.Rank, idx)
	}
	atomic.StoreUint32(u32(p.seg.ctl, offList+4*int(idx)), uint32(m.env.Rank+1))
	p.out = newOutRing(m, p, mem, p.seg)
	return p.out, nil
}

// adopt starts polling the rings of senders that registered since the
// last call. An entry claimed but not yet written is picked up next time.
func (m *module) adopt(n uint32) {
	ctl := m.own.ctl
	for m.nseen < n && int(m.nseen) < m.env.Size {
		v := atomic.LoadUint32(u32(ctl, offList+4*int(m.nseen)))
		if v == 0 {
			return
		}
		m.nseen++
		rank := int(v) - 1
		if rank < 0 || rank >= m.env.Size || rank == m.env.Rank {
			fmt.Fprintf(os.Stderr, "gorun: sm: rank %d: registry names rank %d: ignored\n", m.env.Rank, rank)
			continue
		}
		p := m.peer(rank)
		if p.in != nil || p.err != nil {
			continue
		}
		mem, err := m.own.mapRing(rank, false)
		if err != nil {
			m.failPeer(p, fmt.Errorf("sm: from rank %d: %w", rank, err))
			continue
		}
		if p.pid == 0 {
			p.pid = int(atomic.LoadUint32(u32(mem, offProdPID)))
		}
		// Its segment is where it sleeps: needed to wake it when it waits
		// for room in this ring. Without it (it has closed already), it
		// finds room on its next poll.
		if p.seg == nil {
			m.open(p, segName(m.env.JobID, rank))
		}
		p.in = newInRing(p, mem, m.own.slots, m.own.frag)
		m.in = append(m.in, p.in)
		if m.bellOn {
			// It may have published before it saw the doorbell on.
			m.heat(p.in)
		}
	}
	if !m.bellOn && len(m.in) > m.bellAfter {
		// Switch: from the flag's store on, senders ring; whatever a
		// sender published before it loaded the flag as 0 precedes the
		// store, so the poll of every ring that follows sees it.
		m.bellOn = true
		atomic.StoreUint32(u32(ctl, offBellOn), 1)
		for _, r := range m.in {
			if r.p.err == nil {
				m.heat(r)
			}
		}
	}
}

// heat lists r in m.hot: Progress polls it until it is drained.
func (m *module) heat(r *inRing) {
	if !r.hot {
		r.hot = true
		m.hot = append(m.hot, r)
	}
}

// pollBells is Progress's receive side in doorbell mode: it takes the
// rung bits (a load first, so an idle poll writes nothing), lists their
// rings as hot, and polls the hot rings, dropping each once drained with
// no frame half received. The cost of a call is the bitmap words plus the
// rings that have data, not the number of senders. Ordering: doc.go,
// "Doorbell".
func (m *module) pollBells() int {
	for w, bp := range m.bells {
		if atomic.LoadUint64(bp) == 0 {
			continue
		}
		b := atomic.SwapUint64(bp, 0)
		for b != 0 {
			rank := w*64 + bits.TrailingZeros64(b)
			b &= b - 1
			if rank >= len(m.peers) {
				continue
			}
			p := m.peers[rank]
			if p == nil || p.in == nil {
				// It registered after this call's look at nreg: its
				// entry is written (before its first publish), adopt
				// heats its ring.
				if n := atomic.LoadUint32(u32(m.own.ctl, offNReg)); n != m.nseen {
					m.adopt(n)
				}
				continue
			}
			if p.err == nil {
				m.heat(p.in)
			}
		}
	}
	ev := 0
	for i := 0; i < len(m.hot); {
		r := m.hot[i]
		if r.p.err == nil {
			ev += r.poll(m)
		}
		if r.p.err != nil || (!r.more && !r.inFrame) {
			r.hot = false
			m.hot[i] = m.hot[len(m.hot)-1]
			m.hot[len(m.hot)-1] = nil
			m.hot = m.hot[:len(m.hot)-1]
			continue
		}
		i++
	}
	return ev
}

func (m *module) Progress() int {
	if m.closed {
		return 0
	}
	m.polls++
	ctl := m.own.ctl
	if n := atomic.LoadUint32(u32(ctl, offNReg)); n != m.nseen {
		m.adopt(n)
	}
	if !m.unlinked && m.expect >= 0 && int(atomic.LoadUint32(u32(ctl, offOpened))) >= m.expect {
		m.unlink()
	}
	ev := 0
	if m.bellOn {
		ev = m.pollBells()
	} else {
		for _, r := range m.in {
			if r.p.err == nil {
				ev += r.poll(m)
			}
		}
	}
	for i := 0; i < len(m.busy); {
		o := m.busy[i]
		if o.err == nil && len(o.queue) > 0 {
			k := o.push()
			ev += k
			if k == 0 && len(o.queue) > 0 && o.err == nil {
				m.stalled(o.p)
			}
		}
		if o.err != nil || len(o.queue) == 0 {
			o.busy = false
			m.busy[i] = m.busy[len(m.busy)-1]
			m.busy[len(m.busy)-1] = nil
			m.busy = m.busy[:len(m.busy)-1]
			continue
		}
		i++
	}
	if m.deadIn {
		m.dropDead()
	}
	return ev
}

// failPeer ends every transfer with p: queued frames complete with err, a
// half-received frame is dropped, its ring is no longer polled, and the
// handler hears of it once.
func (m *module) failPeer(p *peer, err error) {
	if p.err != nil {
		return
	}
	p.err = err
	if p.in != nil {
		p.in.inFrame, p.in.dst = false, nil
		m.deadIn = true
	}
	if p.out != nil {
		p.out.fail(err)
	}
	m.env.Handler.PeerFailed(p.rank, err)
}

func (m *module) dropDead() {
	m.deadIn = false
	keep := m.in[:0]
	for _, r := range m.in {
		if r.p.err == nil {
			keep = append(keep, r)
			continue
		}
		unix.Munmap(r.mem)
		r.mem = nil
		r.p.in = nil
	}
	clear(m.in[len(keep):])
	m.in = keep
}

// unlink removes own's name once every local peer has opened it (their
// descriptors keep it alive); the memory goes when the last one closes.
func (m *module) unlink() {
	m.unlinked = true
	if err := unix.Unlink(m.own.path); err != nil && err != unix.ENOENT {
		fmt.Fprintf(os.Stderr, "gorun: sm: rank %d: unlink %s: %v\n", m.env.Rank, m.own.path, err)
	}
}

// Close fails queued frames with btl.ErrClosed, tells peers (the closed
// words they check when a transfer with this rank stalls), unmaps and
// closes everything and unlinks this rank's segment if not done yet.
func (m *module) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.noCopy == "" {
		// Withdraw allowPeerReads' exception: no peer reads any more.
		unix.Prctl(unix.PR_SET_PTRACER, 0, 0, 0, 0)
	}
	atomic.StoreUint32(u32(m.own.ctl, offClosed), 1)
	for _, p := range m.peers {
		if p == nil {
			continue
		}
		if p.out != nil {
			atomic.StoreUint32(u32(p.out.mem, offProdClosed), 1)
			// A peer asleep on a stalled frame from here checks now.
			wake(p.out.rctl)
			p.out.fail(btl.ErrClosed)
			unix.Munmap(p.out.mem)
			p.out.mem = nil
		}
		if p.in != nil {
			if p.in.mem != nil {
				unix.Munmap(p.in.mem)
			}
			p.in = nil
		}
		if p.seg != nil {
			p.seg.close()
		}
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
	}
	m.in, m.busy, m.hot = nil, nil, nil
	if !m.unlinked {
		m.unlink()
	}
	m.own.close()
	return nil
}
