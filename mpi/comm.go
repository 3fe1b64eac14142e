package mpi

import (
	"sync/atomic"

	"github.com/gorun/gorun/coll"
)

// Comm is a communicator: a group of ranks with a private context, so that
// its messages never mix with another communicator's.
type Comm struct {
	name  string
	rt    *rt
	ctx   uint32 // point-to-point context; ctx+1 is the collective one
	rank  int
	world []int       // rank in the communicator -> world rank
	index map[int]int // world rank -> rank in the communicator
	// ident: an intracommunicator with world[i] == i for every rank
	// (World, its duplicates): the statuses of its messages need no lookup
	// in index.
	ident bool
	cc    coll.Comm
	freed atomic.Bool
	// sent is the completed send request Isend returns for sends that
	// completed within the call (pt2pt.go, sentReq).
	sent atomic.Pointer[Request]
	// cart is the Cartesian topology of a communicator made by
	// CartCreate or CartSub; nil otherwise.
	cart *cartTopo
	// graph is the distributed-graph topology of a communicator made by
	// DistGraphCreateAdjacent; nil otherwise.
	graph *graphTopo
	// inter is an intercommunicator's remote group (intercomm.go); nil
	// for an intracommunicator.
	inter *interComm
	ft    ftComm
	attrs attrs
	eh    atomic.Pointer[Errhandler]
}

func newComm(name string, s *rt, ctx uint32, world []int, rank int) *Comm {
	c := &Comm{}
	c.init(name, s, ctx, world, rank)
	return c
}

// init fills in the zero Comm c (Idup hands c out before it is known).
func (c *Comm) init(name string, s *rt, ctx uint32, world []int, rank int) {
	c.initWith(name, s, ctx, world, rank, world, rank)
}

// initWith is init with the members and rank of the view the collectives
// run on: c's own, or the union of an intercommunicator's groups.
func (c *Comm) initWith(name string, s *rt, ctx uint32, world []int, rank int, collWorld []int, collRank int) {
	c.name, c.rt, c.ctx, c.rank, c.world = name, s, ctx, rank, world
	c.index = make(map[int]int, len(world))
	c.ident = c.inter == nil // initInter sets inter first
	for i, w := range world {
		c.index[w] = i
		c.ident = c.ident && w == i
	}
	c.cc = coll.NewComm(s.eng, ctx+1, collWorld, collRank, hostsOf(s, collWorld))
	s.register(c)
}

// hostsOf returns the host id of each of the given world ranks, from the
// roster gorun pushed at Init.
func hostsOf(s *rt, world []int) []string {
	if s.sess == nil {
		return nil
	}
	cards := s.sess.Roster().Cards
	hosts := make([]string, len(world))
	for i, w := range world {
		if w >= 0 && w < len(cards) {
			hosts[i] = cards[w].HostID
		}
	}
	return hosts
}

// Rank is this process's rank in c; Undefined for a nil communicator
// (MPI_COMM_NULL: what Split with Undefined, Create and CartSub give the
// processes outside the new one).
func (c *Comm) Rank() int {
	if c == nil {
		return Undefined
	}
	return c.rank
}

// Size is the number of ranks in c; 0 for a nil communicator.
func (c *Comm) Size() int {
	if c == nil {
		return 0
	}
	return len(c.world)
}

// Name is c's name (MPI_COMM_WORLD, MPI_COMM_SELF, ...); MPI_COMM_NULL
// for a nil communicator.
func (c *Comm) Name() string {
	if c == nil {
		return "MPI_COMM_NULL"
	}
	return c.name
}

// check validates c for operation op (checkSlow says what is wrong). The
// point-to-point entries test good inline instead (fastPeer): the calls
// down through the checks were ~3 ns of an Irecv's 34.
func (c *Comm) check(op string) error {
	if c.good() {
		return nil
	}
	return c.checkSlow(op)
}

// good reports whether c is live, not freed and not revoked: check's test,
// small enough to inline (fastPeer's too).
func (c *Comm) good() bool {
	return c != nil && c.rt != nil && !c.freed.Load() && !c.ft.revoked.Load() && live.Load() == c.rt
}

// checkSlow is check's answer for a communicator that check's test did
// not pass.
func (c *Comm) checkSlow(op string) error {
	if err := c.checkLive(op); err != nil {
		return err
	}
	if c.ft.revoked.Load() {
		return errorf(ErrRevoked, op, "%s was revoked (Shrink it, or Free it)", c.name)
	}
	return nil
}

// peerRank validates a destination or source rank of c and returns its
// world rank; AnySource passes through when allowed. On an
// intercommunicator the rank is the remote group's.
func (c *Comm) peerRank(op string, r int, allowAny bool) (int, error) {
	if allowAny && r == AnySource {
		return AnySource, c.checkAnySource(op)
	}
	peers, what := c.world, ""
	if c.inter != nil {
		peers, what = c.inter.remote, "the remote group of "
	}
	if r < 0 || r >= len(peers) {
		return 0, errorf(ErrRank, op, "rank %d is not in %s%s (size %d)", r, what, c.name, len(peers))
	}
	return peers[r], nil
}

// fromWorld translates the world rank of a peer to c's (on an
// intercommunicator, to the remote group's).
func (c *Comm) fromWorld(w int) int {
	if c.ident {
		// No map lookup on every received message's status (0.5% of
		// an 8-byte exchange completed by Waitall on the 2-core VM).
		if w >= 0 && w < len(c.world) {
			return w
		}
		return -1
	}
	index := c.index
	if c.inter != nil {
		index = c.inter.rindex
	}
	if r, ok := index[w]; ok {
		return r
	}
	return -1
}
