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
	cc    coll.Comm
	freed atomic.Bool
	// cart is the Cartesian topology of a communicator made by
	// CartCreate or CartSub; nil otherwise.
	cart *cartTopo
	// graph is the distributed-graph topology of a communicator made by
	// DistGraphCreateAdjacent; nil otherwise.
	graph *graphTopo
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
	c.name, c.rt, c.ctx, c.rank, c.world = name, s, ctx, rank, world
	c.index = make(map[int]int, len(world))
	for i, w := range world {
		c.index[w] = i
	}
	c.cc = coll.NewComm(s.eng, ctx+1, world, rank, hostsOf(s, world))
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

// Rank is this process's rank in c.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in c.
func (c *Comm) Size() int { return len(c.world) }

// Name is c's name (MPI_COMM_WORLD, MPI_COMM_SELF, ...).
func (c *Comm) Name() string { return c.name }

// check validates c for operation op.
func (c *Comm) check(op string) error {
	if err := c.checkLive(op); err != nil {
		return err
	}
	if c.ft.revoked.Load() {
		return errorf(ErrRevoked, op, "%s was revoked (Shrink it, or Free it)", c.name)
	}
	return nil
}

// peerRank validates a destination or source rank of c and returns its
// world rank; AnySource passes through when allowed.
func (c *Comm) peerRank(op string, r int, allowAny bool) (int, error) {
	if allowAny && r == AnySource {
		return AnySource, c.checkAnySource(op)
	}
	if r < 0 || r >= len(c.world) {
		return 0, errorf(ErrRank, op, "rank %d is not in %s (size %d)", r, c.name, len(c.world))
	}
	return c.world[r], nil
}

// fromWorld translates a world rank to c's.
func (c *Comm) fromWorld(w int) int {
	if r, ok := c.index[w]; ok {
		return r
	}
	return -1
}
