package coll

import (
	"errors"
	"fmt"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/p2p"
)

// Comm is a communicator as the algorithms see it: this rank, the members'
// world ranks and nodes, and the collective context id. The value made by
// NewComm describes the communicator; Begin returns a per-call copy that
// also carries the call's tag, and algorithms receive that copy.
type Comm struct {
	// E is this process's point-to-point engine.
	E *p2p.Engine
	// Ctx is the communicator's collective context id.
	Ctx uint32
	// World maps a rank of the communicator to its world rank.
	World []int
	// Me is this process's rank in the communicator.
	Me int
	// Node maps a rank to its node (0..Nodes-1, numbered in order of first
	// appearance); ranks of one node share a host.
	Node []int
	// Nodes is the number of distinct nodes.
	Nodes int

	sh      *shared
	seq     uint64 // this call's sequence number (0: not begun)
	tag     int    // this call's tag base: seq's low bits << subBits
	queried bool   // this call asked the others about a stall (notice.go)
	// in: for a set-up view made by setupIn, the key of the call the
	// set-up runs inside (0: none, as for setupView's; no call's key is
	// 0, Begin). A uint32 beside queried: the per-call copies of Comm
	// stay their size.
	in uint32
}

// Tags on a collective context: every call gets a fresh sequence number,
// so that calls in flight at once (nonblocking collectives) never match
// each other's messages, and its tag is that number shifted left by
// subBits; the low bits name a sub-channel (the phases of a hierarchical
// algorithm, the completion notice of a nonblocking call). Tag 0 carries
// the notices of notice.go.
const (
	subBits   = 5
	seqBits   = 31 - subBits
	seqMask   = 1<<seqBits - 1
	tagNotice = 0
	// subNotify is the sub-channel of a nonblocking call's completion
	// notice to itself (see Notify).
	subNotify = 1<<subBits - 1
	// subShmSetup is the channel of the shared-memory set-up (shm.go), a
	// sub-channel of sequence 0 (see setupView).
	subShmSetup = 1
	// subRetire is the channel, of sequence 0 on the world's context, of
	// the notices that a rank has unmapped a peer's GPU region
	// (gpuretire.go); apart from every ch* sub-channel of the algorithms,
	// which a view of sequence 0 might use as its whole tag.
	subRetire = subNotify - 1
	// TagSpare is a tag of sequence 0 that nothing of this package
	// sends on (no call, no set-up, no notice, apart from every ch*
	// sub-channel), set aside for a caller's own messages on a collective
	// context: package mpi's CreateGroup with tag TagUB.
	TagSpare = subNotify - 2
)

// NewComm describes a communicator: engine, collective context id, the
// members' world ranks, this process's rank, and each member's host id
// (nil: all on one host), from which the algorithms learn the nodes.
func NewComm(e *p2p.Engine, ctx uint32, world []int, me int, hosts []string) Comm {
	c := Comm{E: e, Ctx: ctx, World: world, Me: me}
	c.sh = &shared{e: e, ctx: ctx, world: world, me: me}
	c.sh.seq.Store(uint64(pSeqStart()))
	liveMu.Lock()
	live[c.sh] = true
	liveMu.Unlock()
	c.sh.skip = uint64(max(pSeqSkip(), 0))
	c.Node, c.Nodes = nodesOf(hosts, len(world))
	if n := pFakeNodes(); n > 1 {
		// Test knob: pretend world rank w lives on node w mod n.
		hs := make([]string, len(world))
		for i, w := range world {
			hs[i] = fmt.Sprint(w % n)
		}
		c.Node, c.Nodes = nodesOf(hs, len(world))
	}
	return c
}

// nodesOf numbers the distinct hosts in order of first appearance.
func nodesOf(hosts []string, n int) ([]int, int) {
	node := make([]int, n)
	if len(hosts) != n {
		return node, 1
	}
	idx := map[string]int{}
	for i, h := range hosts {
		k, ok := idx[h]
		if !ok {
			k = len(idx)
			idx[h] = k
		}
		node[i] = k
	}
	return node, len(idx)
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.Me }

// Size is the communicator's size.
func (c *Comm) Size() int { return len(c.World) }

// Seq is the sequence number of the call c was begun for (0: not begun),
// the same at every rank of the communicator.
func (c *Comm) Seq() uint64 { return c.seq }

// Begin starts a call: it takes the communicator's next sequence number
// and returns the view the call's algorithm uses. Every rank must begin
// the same calls in the same order (MPI's rule for collectives); the
// sequence number is what lets calls overlap.
func (c *Comm) Begin() Comm {
	var v Comm
	c.BeginInto(&v)
	return v
}

// BeginInto is Begin that writes the view into v (the view is 120 bytes:
// a blocking call's is written where its algorithm reads it).
func (c *Comm) BeginInto(v *Comm) {
	*v = *c
	s := c.sh.seq.Add(1)
	for s&seqMask == 0 {
		s = c.sh.seq.Add(1)
	}
	if c.sh.skip > 0 && s%64 == 0 {
		c.sh.seq.Add(c.sh.skip)
	}
	v.seq = s
	v.tag = int(s&seqMask) << subBits
	if c.sh.nAbort.Load() != 0 {
		c.sh.mu.Lock()
		c.sh.forget(v.key())
		c.sh.mu.Unlock()
	}
}

// setupView returns c on channel ch of sequence 0, for a one-time set-up
// of the communicator's state that runs inside a call but is not part of
// it. No call has sequence 0 (Begin skips it) and its tags, but for tag 0
// (the notices), carry nothing else, so a set-up's messages never mix with
// a call's; an abort revokes the tags of the aborted call only, so a
// set-up that every rank entered completes at every rank even when the
// call it runs in is aborted. The view never asks the others about a
// stall (that is about calls). What it still fails on: a failed peer, a
// revoked communicator.
func (c *Comm) setupView(ch int) *Comm {
	v := *c
	v.seq, v.tag, v.queried, v.in = 0, ch, true, 0
	return &v
}

// setupIn is setupView for a set-up that runs inside c's call and that
// every rank making the call runs (the shared-memory segment's set-up and
// its renewal). Stalled, it asks the others whether they have begun the
// call (a set-up query, notice.go); a rank in Finalize that never began
// it answers with an abort, and the set-up fails at every rank that waits
// in it: the rank in Finalize will never enter it, so none of them could
// complete it. So does an abort of the call that a process failure
// caused (the set-up needs every rank; under --enable-recovery the
// survivors go on). Any other abort of the call leaves the set-up alone,
// as for setupView.
func (c *Comm) setupIn(ch int) *Comm {
	v := c.setupView(ch)
	v.queried, v.in = false, c.key()
	return v
}

// sub returns a communicator of the given ranks of c (in that order) for
// one phase of an algorithm, on sub-channel ch of c's call. ranks must
// include c.Me.
func (c *Comm) sub(ranks []int, ch int) *Comm {
	v := *c
	v.World = make([]int, len(ranks))
	v.Node = make([]int, len(ranks))
	v.Me = -1
	for i, r := range ranks {
		v.World[i] = c.World[r]
		v.Node[i] = c.Node[r]
		if r == c.Me {
			v.Me = i
		}
	}
	v.tag = c.tag&^(1<<subBits-1) | ch
	return &v
}

func (c *Comm) isend(buf []byte, dst int) (*p2p.Request, error) {
	return c.isendMem(btl.HostMem(buf), dst)
}

func (c *Comm) irecv(buf []byte, src int) (*p2p.Request, error) {
	return c.irecvMem(btl.HostMem(buf), src)
}

func (c *Comm) isendMem(m btl.Mem, dst int) (*p2p.Request, error) {
	r, err := c.E.IsendMem(c.Ctx, c.World[dst], c.tag, m, false)
	if err != nil {
		if isAborted(err) { // the call's tags are revoked (notice.go)
			return nil, err
		}
		return nil, fmt.Errorf("send to rank %d: %w", dst, err)
	}
	return r, nil
}

func (c *Comm) irecvMem(m btl.Mem, src int) (*p2p.Request, error) {
	r, err := c.E.IrecvMem(c.Ctx, c.World[src], c.tag, m)
	if err != nil {
		if isAborted(err) {
			return nil, err
		}
		return nil, fmt.Errorf("receive from rank %d: %w", src, err)
	}
	return r, nil
}

// await blocks until r completes, or until another rank reports that this
// call failed (notice.go).
func (c *Comm) await(r *p2p.Request) error {
	if !r.Done() {
		if c.sh == nil || len(c.World) == 1 {
			r.Wait()
		} else if err := c.sh.wait(c, r); err != nil {
			return err
		}
	}
	_, err := r.Result()
	if err != nil && c.sh != nil {
		err = c.sh.refused(c, err)
	}
	return err
}

// waitSend completes a send to rank dst.
//
// Once the request has completed (well or not) it goes back to the
// engine's free list (Release; a request still in flight, after an abort,
// is left alone): the algorithms wait for each of their requests once and
// keep none after. Left to the collector they cost about 400 bytes each:
// a point-to-point Alltoall of 8 B at np=2 allocated 940 bytes a call, and
// its first ~60,000 calls ran 5-6x slower while that garbage grew the
// heap to the collector's floor (docs/measurements.md, "Message rate").
func (c *Comm) waitSend(r *p2p.Request, dst int) error {
	defer c.E.Release(r)
	if err := c.await(r); err != nil {
		if isAborted(err) {
			return err
		}
		return fmt.Errorf("send to rank %d: %w", dst, err)
	}
	return nil
}

// waitRecv completes a receive of exactly want bytes from rank src, and
// gives its request back as waitSend does.
func (c *Comm) waitRecv(r *p2p.Request, src, want int) error {
	defer c.E.Release(r)
	if err := c.await(r); err != nil {
		if isAborted(err) {
			return err
		}
		return fmt.Errorf("receive from rank %d: %w", src, err)
	}
	st, _ := r.Result()
	if st.Bytes != want {
		return fmt.Errorf("receive from rank %d: %d bytes where %d were expected (%w)", src, st.Bytes, want, ErrCount)
	}
	return nil
}

// ErrCount is the cause of an error when a rank received fewer bytes than
// its arguments call for: the ranks passed mismatched counts.
var ErrCount = errors.New("mismatched counts between ranks")

func (c *Comm) send(buf []byte, dst int) error {
	r, err := c.isend(buf, dst)
	if err != nil {
		return err
	}
	return c.waitSend(r, dst)
}

func (c *Comm) recv(buf []byte, src int) error {
	r, err := c.irecv(buf, src)
	if err != nil {
		return err
	}
	return c.waitRecv(r, src, len(buf))
}

// sendrecv sends sbuf to dst and receives rbuf from src at once (no
// deadlock whatever the sizes).
func (c *Comm) sendrecv(sbuf []byte, dst int, rbuf []byte, src int) error {
	rr, err := c.irecv(rbuf, src)
	if err != nil {
		return err
	}
	sr, err := c.isend(sbuf, dst)
	if err != nil {
		return err
	}
	if err := c.waitRecv(rr, src, len(rbuf)); err != nil {
		return err
	}
	return c.waitSend(sr, dst)
}

// pending is a set of requests in flight, completed together. Its first
// pendingInline requests are listed in an array of its own, so that an
// algorithm's pending, a local variable, costs no allocation for a few
// requests: three lists grown from nil on every call were most of a
// point-to-point collective's garbage (105 bytes a call of Alltoall at
// np 2; docs/measurements.md, "Message rate").
type pending struct {
	n    int
	in   [pendingInline]pendEntry
	more []pendEntry
}

const pendingInline = 4

// pendEntry is a request in flight, its peer, and the bytes a receive
// expects (-1 for a send).
type pendEntry struct {
	r    *p2p.Request
	peer int
	want int
}

func (p *pending) add(e pendEntry) {
	if p.n < pendingInline {
		p.in[p.n] = e
	} else {
		p.more = append(p.more, e)
	}
	p.n++
}

// len is how many requests p lists; at(i) is the i-th listed.
func (p *pending) len() int { return p.n }

func (p *pending) at(i int) pendEntry {
	if i < pendingInline {
		return p.in[i]
	}
	return p.more[i-pendingInline]
}

func (p *pending) send(c *Comm, buf []byte, dst int) error {
	return p.sendMem(c, btl.HostMem(buf), dst)
}

func (p *pending) recv(c *Comm, buf []byte, src int) error {
	return p.recvMem(c, btl.HostMem(buf), src)
}

func (p *pending) sendMem(c *Comm, m btl.Mem, dst int) error {
	r, err := c.isendMem(m, dst)
	if err != nil {
		return err
	}
	p.add(pendEntry{r, dst, -1})
	return nil
}

func (p *pending) recvMem(c *Comm, m btl.Mem, src int) error {
	r, err := c.irecvMem(m, src)
	if err != nil {
		return err
	}
	p.add(pendEntry{r, src, m.Len()})
	return nil
}

// wait completes every request; the first failure ends the wait.
func (p *pending) wait(c *Comm) error {
	for i := range p.n {
		e := p.at(i)
		var err error
		if e.want < 0 {
			err = c.waitSend(e.r, e.peer)
		} else {
			err = c.waitRecv(e.r, e.peer, e.want)
		}
		if err != nil {
			return err
		}
	}
	p.n, p.in = 0, [pendingInline]pendEntry{}
	clear(p.more)
	p.more = p.more[:0]
	return nil
}

// PostNotify posts the receive that reports a nonblocking call's end:
// Notify's zero-byte send to this rank itself completes it, so that the
// call is an ordinary p2p request (it works with Wait, Test, Waitall).
func (c *Comm) PostNotify() (*p2p.Request, error) {
	return c.E.Irecv(c.Ctx, c.World[c.Me], c.tag|subNotify, nil)
}

// Notify completes the receive of PostNotify.
func (c *Comm) Notify() error {
	_, err := c.E.IsendNow(c.Ctx, c.World[c.Me], c.tag|subNotify, nil)
	return err
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func getU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
