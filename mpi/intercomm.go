package mpi

import (
	"fmt"
	"slices"

	"github.com/gorun/gorun/coll"
)

// Intercommunicators (MPI_Intercomm_create, MPI_Intercomm_merge).
//
// An intercommunicator joins two disjoint groups: a process's Rank, Size
// and Group are its own (local) group's, and the ranks it names in
// point-to-point calls, and the Source of what it receives, are the other
// (remote) group's (RemoteSize, RemoteGroup). Both groups share one
// context pair, agreed as every communicator's is (ctxid.go) over the
// processes of both groups: each group's masks are combined by an
// Allreduce over its local communicator, and the two leaders exchange
// theirs over the peer communicator.
//
// Collectives on an intercommunicator (intercoll.go, intercollv.go):
// Barrier, Bcast, Reduce, Gather(v) and Scatter(v) (with Root and
// ProcNull in the root's group, as MPI_ROOT and MPI_PROC_NULL),
// Allreduce, Allgather(v), Alltoall(v), ReduceScatter and
// ReduceScatterBlock (each group receives what the other group
// contributed), blocking and nonblocking. Dup, Idup, Split and Create
// make intercommunicators (intercreate.go). Scan, Exscan, Alltoallw, the
// object collectives (BcastObj ...), CreateGroup, SplitType, the
// topologies, windows, the persistent collectives, Agree and Shrink fail
// with ErrComm on an intercommunicator; Merge makes an intracommunicator
// of both groups, on which everything works. The collectives run on a
// view of the union of the two groups (coll/inter.go says how).

// Root is MPI_ROOT: the root of a Bcast on an intercommunicator passes it
// as root; the other processes of its group pass ProcNull, and the
// processes of the other group pass the root's rank in the root's group.
const Root = -3

// interComm is what an intercommunicator has besides its local group
// (Comm.world and Comm.rank).
type interComm struct {
	remote []int       // remote rank -> world rank
	rindex map[int]int // world rank -> remote rank
	// localFirst: the local group is ranks [0, len(local)) of the union
	// the collectives run on (Comm.cc), the remote group the rest; at
	// the other group's processes it is the other way around.
	localFirst bool
}

// newInterComm makes the intercommunicator of the local group local (this
// process is local[rank]) and the remote group remote, on context pair
// ctx (initInter says how).
func newInterComm(name string, s *rt, ctx uint32, local []int, rank int, remote []int) *Comm {
	c := &Comm{}
	c.initInter(name, s, ctx, local, rank, remote)
	return c
}

// IsInter reports whether c is an intercommunicator (MPI_Comm_test_inter).
func (c *Comm) IsInter() bool { return c != nil && c.inter != nil }

// RemoteSize is the size of c's remote group (MPI_Comm_remote_size); 0 for
// an intracommunicator.
func (c *Comm) RemoteSize() int {
	if !c.IsInter() {
		return 0
	}
	return len(c.inter.remote)
}

// RemoteGroup returns c's remote group (MPI_Comm_remote_group); it fails
// with ErrComm on an intracommunicator.
func (c *Comm) RemoteGroup() (*Group, error) {
	const op = "Comm.RemoteGroup"
	if err := c.checkLive(op); err != nil {
		return nil, c.fail(err)
	}
	if c.inter == nil {
		return nil, c.fail(errorf(ErrComm, op, "%s is not an intercommunicator", c.name))
	}
	return &Group{world: slices.Clone(c.inter.remote), me: c.world[c.rank]}, nil
}

// intra fails with ErrComm when c is an intercommunicator: op takes an
// intracommunicator.
func (c *Comm) intra(op string) error {
	if c.inter != nil {
		return errorf(ErrComm, op, "%s is an intercommunicator: %s is not supported on intercommunicators (Merge makes an intracommunicator)", c.name, op)
	}
	return nil
}

// splitAt is the number of ranks of the union's first group.
func (in *interComm) splitAt(local int) int {
	if in.localFirst {
		return local
	}
	return len(in.remote)
}

// IntercommCreate makes an intercommunicator of c's group and another,
// disjoint, group (MPI_Intercomm_create). Collective over c, and at the
// same time over the other group's local communicator: each group names
// its leader (localLeader, a rank of c, the same at every process of c),
// and the two leaders, which must both belong to peer, name each other
// (remoteLeader, a rank of peer; significant at the leader only) and use
// tag on peer for their exchanges, which must not meet other messages
// there. Every process of both groups gets the intercommunicator.
//
// A leader whose peer arguments are bad fails, and so does its group (the
// leader tells it), but the other group's leader, which it never reached,
// waits for it, as in MPI: the two sides must agree on their leaders.
func (c *Comm) IntercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	ic, err := c.intercommCreate(localLeader, peer, remoteLeader, tag)
	return ic, c.fail(err)
}

func (c *Comm) intercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	const op = "Comm.IntercommCreate"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.intra(op); err != nil {
		return nil, err
	}
	if localLeader < 0 || localLeader >= c.Size() {
		return nil, errorf(ErrRank, op, "local leader %d is not in %s (size %d)", localLeader, c.name, c.Size())
	}
	leader := c.rank == localLeader
	// The leader checks its peer arguments and learns the remote group;
	// what it found (or that it failed) goes to the whole group, so that
	// no process of c is left waiting for the leader.
	var remote []int64
	var lerr error
	if leader {
		remote, lerr = c.exchangeGroups(op, peer, remoteLeader, tag)
	}
	hdr := []int64{0, int64(len(remote))}
	if lerr != nil {
		hdr[0] = int64(classOf(lerr))
	}
	if err := Bcast(c, hdr, localLeader); err != nil {
		return nil, reop(op, err)
	}
	if lerr != nil {
		return nil, lerr
	}
	if hdr[0] != 0 {
		return nil, errorf(Class(hdr[0]), op, "the local leader (rank %d) failed to reach the remote leader (see its error)", localLeader)
	}
	remote = slices.Grow(remote, int(hdr[1]))[:hdr[1]]
	if err := Bcast(c, remote, localLeader); err != nil {
		return nil, reop(op, err)
	}
	rw := make([]int, len(remote))
	for i, w := range remote {
		rw[i] = int(w)
		if _, ok := c.index[rw[i]]; ok {
			// Every process of both groups sees the same lists: all fail.
			return nil, errorf(ErrComm, op, "the groups are not disjoint: world rank %d is in both", rw[i])
		}
	}
	ctx, err := c.agreeCtxKey(op, ctxKey(c.ctx, 0), func(buf []uint64) error {
		return c.leadersBand(op, buf, leader, localLeader, peer, remoteLeader, tag)
	})
	if err != nil {
		return nil, err
	}
	ic := newInterComm(fmt.Sprintf("%s inter", c.name), c.rt, ctx, slices.Clone(c.world), c.rank, rw)
	ic.inherit(c)
	return ic, nil
}

// exchangeGroups is the leaders' exchange of their groups' world ranks
// over peer with tag; it returns the remote group's.
func (c *Comm) exchangeGroups(op string, peer *Comm, remoteLeader, tag int) ([]int64, error) {
	if err := peer.check(op); err != nil {
		return nil, err
	}
	if _, err := peer.peerRank(op, remoteLeader, false); err != nil {
		return nil, err
	}
	if err := checkTag(op, tag, false); err != nil {
		return nil, err
	}
	n := []int64{int64(len(c.world))}
	rn := []int64{0}
	if _, err := sendrecv("Sendrecv", peer, n, remoteLeader, tag, rn, remoteLeader, tag); err != nil {
		return nil, reop(op, err)
	}
	mine := make([]int64, len(c.world))
	for i, w := range c.world {
		mine[i] = int64(w)
	}
	remote := make([]int64, rn[0])
	if _, err := sendrecv("Sendrecv", peer, mine, remoteLeader, tag, remote, remoteLeader, tag); err != nil {
		return nil, reop(op, err)
	}
	return remote, nil
}

// leadersBand is one round of the context agreement of IntercommCreate:
// the bitwise and of buf over c, then over the two leaders, then
// broadcast over c, so that every process of both groups ends the round
// with the same words. A leader that fails the exchange says so in the
// broadcast, and every process of c fails.
func (c *Comm) leadersBand(op string, buf []uint64, leader bool, localLeader int, peer *Comm, remoteLeader, tag int) error {
	if err := Allreduce(c, buf, buf, Band); err != nil {
		return err
	}
	msg := make([]uint64, len(buf)+1) // the words, then 1 when the exchange failed
	var lerr error
	if leader {
		copy(msg, buf)
		if _, lerr = sendrecv("Sendrecv", peer, buf, remoteLeader, tag, msg[:len(buf)], remoteLeader, tag); lerr == nil {
			for i := range buf {
				msg[i] &= buf[i]
			}
		} else {
			msg[len(buf)] = 1
		}
	}
	if err := Bcast(c, msg, localLeader); err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	if msg[len(buf)] != 0 {
		return errorf(ErrOther, op, "the local leader (rank %d) failed to exchange with the remote leader (see its error)", localLeader)
	}
	copy(buf, msg)
	return nil
}

// Merge returns an intracommunicator of both groups of the
// intercommunicator c (MPI_Intercomm_merge): the group whose processes
// pass high false comes first, each group in its order; when both pass
// the same value, the group holding the lowest world rank comes first.
// Every process of a group must pass the same high. Collective over both
// groups.
func (c *Comm) Merge(high bool) (*Comm, error) {
	m, err := c.merge(high)
	return m, c.fail(err)
}

func (c *Comm) merge(high bool) (*Comm, error) {
	const op = "Comm.Merge"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if c.inter == nil {
		return nil, errorf(ErrComm, op, "%s is not an intercommunicator", c.name)
	}
	in := c.inter
	n := len(c.cc.World)
	flags := make([]int64, n)
	mine := []int64{0}
	if high {
		mine[0] = 1
	}
	if err := c.unionRun(op, coll.Allgather, coll.Args{Send: elemBytes(mine), Recv: elemBytes(flags)}); err != nil {
		return nil, err
	}
	split := in.splitAt(len(c.world))
	for _, g := range [][]int64{flags[:split], flags[split:]} {
		if slices.Min(g) != slices.Max(g) {
			return nil, errorf(ErrArg, op, "the processes of one group passed different values of high")
		}
	}
	// The union's order, unless its first group passed high and the
	// other did not.
	world := slices.Clone(c.cc.World)
	me := c.cc.Me
	if flags[0] == 1 && flags[n-1] == 0 {
		world = slices.Concat(world[split:], world[:split])
		me = (me - split + n) % n
	}
	ctx, err := c.agreeInterCtx(op)
	if err != nil {
		return nil, err
	}
	m := newComm(c.name+" merged", c.rt, ctx, world, me)
	m.inherit(c)
	return m, nil
}

// unionRun runs the collective fn over the union of c's two groups (an
// intracommunicator collective over all of them), as one call on c.
func (c *Comm) unionRun(op string, fn func(*coll.Comm, *coll.Args) error, a coll.Args) error {
	v, err := c.interBegin(op)
	if err != nil {
		return err
	}
	return finishCall(op, &v, &call{fn: fn, args: a}, nil)
}

// interBegin checks the intercommunicator c and starts a call on the
// union of its groups.
func (c *Comm) interBegin(op string) (coll.Comm, error) {
	if err := c.check(op); err != nil {
		return coll.Comm{}, err
	}
	return c.cc.Begin(), nil
}
