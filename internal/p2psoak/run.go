package p2psoak

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

// Run runs cfg's schedule on the world w (collective: every rank calls it
// with the same cfg) and returns how many messages, receives and rounds of
// each kind this rank took part in. The first wrong message or failed
// call ends it with an error that names the round and the message.
func Run(w *mpi.Comm, cfg Config) (map[string]int, error) {
	n, me := w.Size(), w.Rank()
	dup, err := w.Dup()
	if err != nil {
		return nil, err
	}
	defer dup.Free()
	rev, err := w.Split(0, n-1-me)
	if err != nil {
		return nil, err
	}
	defer rev.Free()
	s := &runner{cfg: cfg, comms: [3]*mpi.Comm{w, dup, rev}, dev: -1, counts: map[string]int{}, kept: map[keptKey]*kept{}}
	defer func() {
		for _, k := range s.kept {
			k.q.Free()
		}
	}()
	if cfg.GPU {
		k, err := gpu.DeviceCount()
		if err != nil || k == 0 {
			return nil, fmt.Errorf("p2psoak: device memory asked for, but no GPU: %v", err)
		}
		s.dev = me % k
	}
	if err := mpi.BufferAttach(make([]byte, bsendPer*(bsendMax+mpi.BsendOverhead))); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	bsends := make([]int, n)
	for r := range cfg.Rounds {
		rd := draw(rng, r, n, cfg, bsends)
		var watch *time.Timer
		if cfg.Stall > 0 {
			watch = time.AfterFunc(cfg.Stall, func() { s.stalled(&rd) })
		}
		err := s.round(&rd)
		if watch != nil {
			watch.Stop()
		}
		if err != nil {
			mpi.BufferDetach()
			return s.counts, fmt.Errorf("round %d (seed %d, %d messages, fenced %v): %w", r, cfg.Seed, len(rd.msgs), rd.fenced, err)
		}
	}
	_, err = mpi.BufferDetach()
	return s.counts, err
}

type runner struct {
	cfg    Config
	comms  [3]*mpi.Comm
	dev    int // this rank's GPU; -1: none
	counts map[string]int
	kept   map[keptKey]*kept
}

// Persistent requests are kept from round to round and started again,
// which is what they are for: one per communicator, peer, tag and length
// (and receive buffer), send or receive, up to maxKept (then a new key
// takes the place of one not started in this round); a second of the same
// key in one round gets a request of its own, freed at the round's end.
type keptKey struct {
	send                  bool
	comm, peer, tag, size int
}

type kept struct {
	q     *mpi.Request
	buf   []byte
	round int // the round that last started it
}

const maxKept = 256

// persistent returns the persistent request for key, started for round r
// on the bytes of buf (what to send, or the receive's sentinel): a kept
// one started again (buf copied into its buffer, which it returns), or a
// new one on buf made by init (kept if there is room, else owned, to be
// freed by the caller).
func (s *runner) persistent(k keptKey, r int, buf []byte, init func(buf []byte) (*mpi.Request, error)) (q *mpi.Request, _ []byte, owned bool, err error) {
	if kp := s.kept[k]; kp != nil && kp.round != r {
		copy(kp.buf, buf)
		kp.round = r
		s.counts["persistent requests started again"]++
		return kp.q, kp.buf, false, kp.q.Start()
	}
	if q, err = init(buf); err != nil {
		return nil, nil, false, err
	}
	owned = true
	if _, dup := s.kept[k]; !dup {
		if len(s.kept) >= maxKept {
			// Full: one not started this round (keys of sizes that
			// never come back would hold their places for good)
			// makes room.
			for ok, kp := range s.kept {
				if kp.round != r {
					kp.q.Free()
					delete(s.kept, ok)
					break
				}
			}
		}
		if len(s.kept) < maxKept {
			s.kept[k] = &kept{q: q, buf: buf, round: r}
			owned = false
		}
	}
	return q, buf, owned, q.Start()
}

// stalled prints what this rank sends and receives in rd, which has not
// ended after Config.Stall, and aborts the job.
func (s *runner) stalled(rd *round) {
	w := s.comms[0]
	var b strings.Builder
	fmt.Fprintf(&b, "p2psoak: rank %d: round %d (seed %d, fenced %v) has not ended after %v; its messages here:\n", w.Rank(), rd.r, s.cfg.Seed, rd.fenced, s.cfg.Stall)
	for i := range rd.msgs {
		m := &rd.msgs[i]
		c := s.comms[m.comm]
		if m.src == c.Rank() || m.dst == c.Rank() {
			fmt.Fprintf(&b, "  %v, received by %s\n", m, recvNames[rd.modes[m.comm][m.dst]])
		}
	}
	os.Stderr.WriteString(b.String())
	mpi.Abort(w, 2)
}

// recv is one receive of a round at this rank.
type recv struct {
	comm, mode int
	m          *msg // the message it must get; nil: a wildcard's, found from its status
	buf        []byte
	dbuf       gpu.Buffer
	q          *mpi.Request
	persistent bool // a persistent request of this round's own: freed at its end
	st         mpi.Status
}

// sent is one send of a round at this rank.
type sent struct {
	m          *msg
	buf        []byte
	dbuf       gpu.Buffer
	q          *mpi.Request
	persistent bool // as recv's
}

// round runs rd at this rank: posts its receives, cancels one, sends,
// receives by probes, waits for everything, and checks it.
func (s *runner) round(rd *round) error {
	if rd.sleeper == s.comms[0].Rank() {
		time.Sleep(rd.nap)
	}
	var recvs []*recv
	var sends []*sent
	defer func() {
		for _, x := range recvs {
			freeDev(x.dbuf)
			if x.persistent {
				x.q.Free()
			}
		}
		for _, x := range sends {
			freeDev(x.dbuf)
			if x.persistent {
				x.q.Free()
			}
		}
	}()
	// Posted receives: every communicator whose mode here posts them, in
	// the messages' order (a stream's receives in its order); rMixed's
	// specific ones before its wildcards.
	for pass := range 2 {
		for i := range rd.msgs {
			m := &rd.msgs[i]
			c := s.comms[m.comm]
			mode := rd.modes[m.comm][m.dst]
			if m.dst != c.Rank() || probing(mode) {
				continue
			}
			if late := mode == rMixed && !m.first; late != (pass == 1) {
				continue
			}
			x, err := s.post(rd, m, mode)
			if x != nil {
				recvs = append(recvs, x)
			}
			if err != nil {
				return fmt.Errorf("posting the receive of %v (%s): %w", m, recvNames[mode], err)
			}
		}
	}
	var reqs []*mpi.Request
	for _, x := range recvs {
		reqs = append(reqs, x.q)
	}
	var cancelled *mpi.Request
	if rd.cancel {
		q, err := mpi.Irecv(s.comms[0], make([]byte, 8), mpi.AnySource, cancelTag)
		if err != nil {
			return fmt.Errorf("posting the receive to cancel: %w", err)
		}
		if err := q.Cancel(); err != nil {
			return fmt.Errorf("cancelling a receive: %w", err)
		}
		cancelled = q
		reqs = append(reqs, q)
		s.counts["cancelled receives"]++
	}
	for i := range rd.msgs {
		m := &rd.msgs[i]
		if m.src != s.comms[m.comm].Rank() {
			continue
		}
		x, err := s.start(rd, m)
		if x != nil {
			sends = append(sends, x)
			if x.q != nil {
				reqs = append(reqs, x.q)
			}
		}
		if err != nil {
			return fmt.Errorf("sending %v: %w", m, err)
		}
		s.counts["sent by "+sendNames[m.send]]++
		if m.sdev {
			s.counts["sent from device memory"]++
		}
	}
	if err := s.probes(rd); err != nil {
		return err
	}
	sts, err := mpi.Waitall(reqs)
	if err != nil {
		return fmt.Errorf("Waitall of %d receives and %d sends: %w", len(recvs), len(sends), err)
	}
	for i, x := range recvs {
		x.st = sts[i]
	}
	if cancelled != nil && !sts[len(recvs)].Cancelled() {
		return fmt.Errorf("a cancelled receive (AnySource, tag %d, nothing sent with it) completed not cancelled: %+v", cancelTag, sts[len(recvs)])
	}
	if err := s.checkRecvs(rd, recvs); err != nil {
		return err
	}
	for _, x := range sends {
		if err := s.checkSent(rd, x); err != nil {
			return err
		}
	}
	if rd.fenced {
		s.counts["fenced rounds"]++
		if err := mpi.Barrier(s.comms[0]); err != nil {
			return err
		}
		return s.checkSync(rd)
	}
	return nil
}

// checkSync checks, after a fenced round's Barrier (nothing else in
// flight), that an Issend completes only once its receive has matched:
// rank syncFrom's Issend to syncTo must stay incomplete through 100
// Tests, since syncTo posts its receive only when syncFrom's message with
// goTag says so.
func (s *runner) checkSync(rd *round) error {
	w := s.comms[0]
	if rd.syncFrom == rd.syncTo {
		return nil
	}
	switch w.Rank() {
	case rd.syncFrom:
		q, err := mpi.Issend(w, []byte{byte(rd.r)}, rd.syncTo, syncTag)
		if err != nil {
			return fmt.Errorf("Issend to rank %d for the synchronous check: %w", rd.syncTo, err)
		}
		for i := range 100 {
			done, _, err := q.Test()
			if err != nil {
				return fmt.Errorf("Test of an Issend to rank %d: %w", rd.syncTo, err)
			}
			if done {
				return fmt.Errorf("an Issend to rank %d completed (at Test %d) before that rank posted its receive", rd.syncTo, i)
			}
		}
		if err := mpi.Send(w, []byte{}, rd.syncTo, goTag); err != nil {
			return err
		}
		_, err = q.Wait()
		s.counts["Issends checked to wait for their receive"]++
		return err
	case rd.syncTo:
		if _, err := mpi.Recv(w, []byte{}, rd.syncFrom, goTag); err != nil {
			return err
		}
		got := []byte{0}
		if _, err := mpi.Recv(w, got, rd.syncFrom, syncTag); err != nil {
			return fmt.Errorf("receiving the synchronous check's Issend from rank %d: %w", rd.syncFrom, err)
		}
		if got[0] != byte(rd.r) {
			return fmt.Errorf("the synchronous check's Issend from rank %d holds %d, want %d", rd.syncFrom, got[0], byte(rd.r))
		}
	}
	return nil
}

// post posts the receive of m by mode (a wildcard's buffer fits any of the
// messages it may take).
func (s *runner) post(rd *round, m *msg, mode int) (*recv, error) {
	c := s.comms[m.comm]
	src, tag := m.src, m.tag
	x := &recv{comm: m.comm, mode: mode, m: m}
	size := m.bytes
	switch {
	case mode == rAnyTag:
		tag = mpi.AnyTag
	case mode == rAnySource || mode == rAnyAny || mode == rMixed && !m.first:
		src = mpi.AnySource
		if mode != rAnySource {
			tag = mpi.AnyTag
		}
		x.m = nil
		for i := range rd.msgs {
			o := &rd.msgs[i]
			if o.comm == m.comm && o.dst == m.dst && (tag == mpi.AnyTag || o.tag == tag) {
				size = max(size, o.bytes)
			}
		}
	}
	size += m.slack
	x.buf = bytes.Repeat([]byte{sentinel}, size)
	s.counts["received by "+recvNames[mode]]++
	var err error
	switch {
	case x.m != nil && m.rdev:
		s.counts["received into device memory"]++
		if x.dbuf, err = s.devOf(x.buf); err != nil {
			return nil, err
		}
		x.q, err = mpi.IrecvGPU(c, x.dbuf, src, tag)
	case mode == rSpecific && m.idx%4 == 0:
		k := keptKey{false, m.comm, src, tag, size}
		x.q, x.buf, x.persistent, err = s.persistent(k, rd.r, x.buf, func(b []byte) (*mpi.Request, error) { return mpi.RecvInit(c, b, src, tag) })
	default:
		x.q, err = mpi.Irecv(c, x.buf, src, tag)
	}
	return x, err
}

// start sends m (a blocking send returns a sent without a request).
func (s *runner) start(rd *round, m *msg) (*sent, error) {
	c := s.comms[m.comm]
	x := &sent{m: m, buf: make([]byte, m.bytes)}
	pattern(x.buf, rd.r, m.idx)
	var err error
	if m.sdev {
		if x.dbuf, err = s.devOf(x.buf); err != nil {
			return nil, err
		}
		if m.send == sSend {
			return x, mpi.SendGPU(c, x.dbuf, m.dst, m.tag)
		}
		x.q, err = mpi.IsendGPU(c, x.dbuf, m.dst, m.tag)
		return x, err
	}
	switch m.send {
	case sIsend:
		x.q, err = mpi.Isend(c, x.buf, m.dst, m.tag)
	case sIssend:
		x.q, err = mpi.Issend(c, x.buf, m.dst, m.tag)
	case sSend:
		err = mpi.Send(c, x.buf, m.dst, m.tag)
	case sSsend:
		err = mpi.Ssend(c, x.buf, m.dst, m.tag)
	case sIbsend:
		x.q, err = mpi.Ibsend(c, x.buf, m.dst, m.tag)
	case sPersistent:
		k := keptKey{true, m.comm, m.dst, m.tag, m.bytes}
		x.q, x.buf, x.persistent, err = s.persistent(k, rd.r, x.buf, func(b []byte) (*mpi.Request, error) { return mpi.SendInit(c, b, m.dst, m.tag) })
	}
	return x, err
}

// probes receives, on every communicator whose mode here is a probing one,
// what comes to this rank: by source in the messages' order (rMprobe,
// rProbe), or as it comes (rImprobe), checking each as it lands.
func (s *runner) probes(rd *round) error {
	for ci, c := range s.comms {
		mode := rd.modes[ci][c.Rank()]
		if !probing(mode) {
			continue
		}
		var mine []*msg
		for i := range rd.msgs {
			if m := &rd.msgs[i]; m.comm == ci && m.dst == c.Rank() {
				mine = append(mine, m)
			}
		}
		if mode == rImprobe {
			if err := s.improbes(rd, ci, mine); err != nil {
				return err
			}
			continue
		}
		for _, m := range mine {
			s.counts["received by "+recvNames[mode]]++
			var st mpi.Status
			var err error
			buf := bytes.Repeat([]byte{sentinel}, m.bytes+m.slack)
			if mode == rMprobe {
				var pm *mpi.Message
				if pm, st, err = mpi.Mprobe(c, m.src, mpi.AnyTag); err == nil {
					if st.Tag != m.tag || st.Bytes() != m.bytes {
						return fmt.Errorf("Mprobe(%d, AnyTag) for %v found tag %d, %d bytes", m.src, m, st.Tag, st.Bytes())
					}
					st, err = mpi.Mrecv(buf, pm)
				}
			} else {
				if st, err = mpi.Probe(c, m.src, mpi.AnyTag); err == nil {
					if st.Tag != m.tag || st.Bytes() != m.bytes {
						return fmt.Errorf("Probe(%d, AnyTag) for %v found tag %d, %d bytes", m.src, m, st.Tag, st.Bytes())
					}
					st, err = mpi.Recv(c, buf, m.src, st.Tag)
				}
			}
			if err != nil {
				return fmt.Errorf("receiving %v by %s: %w", m, recvNames[mode], err)
			}
			if err := check(rd, m, buf, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// improbes receives mine on communicator ci by Improbe(AnySource, AnyTag)
// and Mrecv, in whatever order they come (each source's in its order). A
// message that never comes leaves it polling, as Mprobe would wait: the
// round's stall watchdog (Config.Stall) reports it.
func (s *runner) improbes(rd *round, ci int, mine []*msg) error {
	c := s.comms[ci]
	q := queues(mine, false)
	for left := len(mine); left > 0; {
		pm, st, err := mpi.Improbe(c, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return fmt.Errorf("Improbe on communicator %d: %w", ci, err)
		}
		if pm == nil {
			continue
		}
		m, err := q.take(st)
		if err != nil {
			return fmt.Errorf("Improbe on communicator %d: %w", ci, err)
		}
		buf := bytes.Repeat([]byte{sentinel}, m.bytes+m.slack)
		if st, err = mpi.Mrecv(buf, pm); err != nil {
			return fmt.Errorf("Mrecv of %v: %w", m, err)
		}
		if err := check(rd, m, buf, st); err != nil {
			return err
		}
		s.counts["received by "+recvNames[rImprobe]]++
		left--
	}
	return nil
}

// streams holds, for the wildcard receives of one communicator, the
// messages they may take, each source's (or source's and tag's) in order.
type streams struct {
	byTag bool
	q     map[[2]int][]*msg
}

func queues(ms []*msg, byTag bool) *streams {
	s := &streams{byTag: byTag, q: map[[2]int][]*msg{}}
	for _, m := range ms {
		k := s.key(m.src, m.tag)
		s.q[k] = append(s.q[k], m)
	}
	return s
}

func (s *streams) key(src, tag int) [2]int {
	if s.byTag {
		return [2]int{src, tag}
	}
	return [2]int{src, -1}
}

// take returns the message a wildcard receive with status st got: the
// next of its stream, which must have st's tag and length.
func (s *streams) take(st mpi.Status) (*msg, error) {
	k := s.key(st.Source, st.Tag)
	if len(s.q[k]) == 0 {
		return nil, fmt.Errorf("a message from rank %d with tag %d (%d bytes) came that none was sent, or it came twice", st.Source, st.Tag, st.Bytes())
	}
	m := s.q[k][0]
	if m.tag != st.Tag || m.bytes != st.Bytes() {
		return nil, fmt.Errorf("from rank %d came tag %d, %d bytes, where the next message of that rank sent is %v: out of order", st.Source, st.Tag, st.Bytes(), m)
	}
	s.q[k] = s.q[k][1:]
	return m, nil
}

// checkRecvs checks the posted receives: each its own message, each
// wildcard the next of the stream its status names.
func (s *runner) checkRecvs(rd *round, recvs []*recv) error {
	wild := map[[2]int]*streams{} // by communicator and mode
	for _, x := range recvs {
		if x.m != nil {
			if x.dbuf.Len() > 0 {
				if err := x.dbuf.CopyToHost(x.buf); err != nil {
					return err
				}
			}
			if err := check(rd, x.m, x.buf, x.st); err != nil {
				return err
			}
			continue
		}
		k := [2]int{x.comm, x.mode}
		q := wild[k]
		if q == nil {
			// The messages the wildcards of x's communicator and mode
			// may take: every one to this rank there (rMixed: but the
			// streams' first, which receives of their own took).
			var ms []*msg
			me := s.comms[x.comm].Rank()
			for i := range rd.msgs {
				if m := &rd.msgs[i]; m.comm == x.comm && m.dst == me && !(x.mode == rMixed && m.first) {
					ms = append(ms, m)
				}
			}
			q = queues(ms, x.mode == rAnySource)
			wild[k] = q
		}
		m, err := q.take(x.st)
		if err != nil {
			return fmt.Errorf("a %s receive on communicator %d: %w", recvNames[x.mode], x.comm, err)
		}
		if err := check(rd, m, x.buf, x.st); err != nil {
			return err
		}
	}
	return nil
}

// check checks that buf, received with status st, holds m and then the
// sentinel.
func check(rd *round, m *msg, buf []byte, st mpi.Status) error {
	if st.Source != m.src || st.Tag != m.tag || st.Bytes() != m.bytes {
		return fmt.Errorf("%v: status says rank %d, tag %d, %d bytes", m, st.Source, st.Tag, st.Bytes())
	}
	if i, want := unlike(buf[:m.bytes], rd.r, m.idx); i >= 0 {
		return fmt.Errorf("%v: byte %d received is %#x, want %#x", m, i, buf[i], want)
	}
	for i, b := range buf[m.bytes:] {
		if b != sentinel {
			return fmt.Errorf("%v: byte %d past the message, in a receive buffer of %d bytes, is %#x: written", m, m.bytes+i, len(buf), b)
		}
	}
	return nil
}

// checkSent checks that a send's buffer still holds its message.
func (s *runner) checkSent(rd *round, x *sent) error {
	got := x.buf
	if x.dbuf.Len() > 0 {
		got = make([]byte, len(x.buf))
		if err := x.dbuf.CopyToHost(got); err != nil {
			return err
		}
	}
	if i, want := unlike(got, rd.r, x.m.idx); i >= 0 {
		return fmt.Errorf("%v: the send buffer's byte %d changed to %#x (was %#x)", x.m, i, got[i], want)
	}
	return nil
}

// unlike returns the first byte of b that is not message idx of round r's
// (pattern) and what it should be, or -1.
func unlike(b []byte, r, idx int) (int, byte) {
	want := make([]byte, len(b))
	pattern(want, r, idx)
	if bytes.Equal(b, want) {
		return -1, 0
	}
	i := 0
	for b[i] == want[i] {
		i++
	}
	return i, want[i]
}

// devOf returns a device copy of b on this rank's GPU.
func (s *runner) devOf(b []byte) (gpu.Buffer, error) {
	d, err := gpu.Alloc(s.dev, gpu.Uint8, len(b))
	if err != nil || len(b) == 0 {
		return d, err
	}
	if err := d.CopyFromHost(b); err != nil {
		freeDev(d)
		return gpu.Buffer{}, err
	}
	return d, nil
}

func freeDev(d gpu.Buffer) {
	if d.Len() > 0 {
		d.Free()
	}
}
