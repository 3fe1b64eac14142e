package mpi

import "github.com/gorun/gorun/coll"

// Nonblocking (MPI_Ineighbor_*) and persistent (MPI-4
// MPI_Neighbor_*_init) neighbourhood collectives: the blocking calls'
// arguments and checks, run as the other nonblocking collectives run
// (icollective.go) and the other persistent ones (pcoll.go). Their
// buffers belong to the call until the request completes.

// startNeighbor is runNeighbor as a nonblocking call.
func startNeighbor(op string, c *Comm, prep nbPrep) (q *Request, err error) {
	defer c.failTo(&err)
	nb, err := c.neighbors(op)
	if err != nil {
		return nil, err
	}
	v, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	a, err := prep(nb)
	return start(c, op, v, call{fn: coll.Neighbor, args: a}, err)
}

// initNeighbor is runNeighbor as a persistent request.
func initNeighbor(op string, c *Comm, prep nbPrep) (*Request, error) {
	nb, err := c.neighbors(op)
	if err != nil {
		return nil, c.fail(err)
	}
	return initColl(op, c, func(cl *call) error {
		a, err := prep(nb)
		cl.fn, cl.args = coll.Neighbor, a
		return err
	}, nil)
}

// IneighborAllgather is the nonblocking NeighborAllgather.
func IneighborAllgather[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return startNeighbor("IneighborAllgather", c, nbAllgather("IneighborAllgather", sendbuf, recvbuf))
}

// IneighborAllgatherv is the nonblocking NeighborAllgatherv.
func IneighborAllgatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) (*Request, error) {
	return startNeighbor("IneighborAllgatherv", c, nbAllgatherv("IneighborAllgatherv", sendbuf, recvbuf, counts, displs))
}

// IneighborAlltoall is the nonblocking NeighborAlltoall.
func IneighborAlltoall[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return startNeighbor("IneighborAlltoall", c, nbAlltoall("IneighborAlltoall", sendbuf, recvbuf))
}

// IneighborAlltoallv is the nonblocking NeighborAlltoallv.
func IneighborAlltoallv[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) (*Request, error) {
	return startNeighbor("IneighborAlltoallv", c, nbAlltoallv("IneighborAlltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
}

// NeighborAllgatherInit makes a persistent NeighborAllgather
// (MPI_Neighbor_allgather_init).
func NeighborAllgatherInit[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return initNeighbor("NeighborAllgatherInit", c, nbAllgather("NeighborAllgatherInit", sendbuf, recvbuf))
}

// NeighborAllgathervInit makes a persistent NeighborAllgatherv
// (MPI_Neighbor_allgatherv_init).
func NeighborAllgathervInit[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) (*Request, error) {
	return initNeighbor("NeighborAllgathervInit", c, nbAllgatherv("NeighborAllgathervInit", sendbuf, recvbuf, counts, displs))
}

// NeighborAlltoallInit makes a persistent NeighborAlltoall
// (MPI_Neighbor_alltoall_init).
func NeighborAlltoallInit[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return initNeighbor("NeighborAlltoallInit", c, nbAlltoall("NeighborAlltoallInit", sendbuf, recvbuf))
}

// NeighborAlltoallvInit makes a persistent NeighborAlltoallv
// (MPI_Neighbor_alltoallv_init).
func NeighborAlltoallvInit[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) (*Request, error) {
	return initNeighbor("NeighborAlltoallvInit", c, nbAlltoallv("NeighborAlltoallvInit", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
}
