package mpi

import (
	"github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/gpu"
)

// Nonblocking GPU collectives: the calls of devcoll.go and devcollv.go
// started as the host nonblocking collectives are (icollective.go: the
// algorithm runs in a goroutine of its own and the Request completes when
// it ends). Arguments are checked before the call returns, with the
// errors of the blocking form. When Wait (or Test) reports completion the
// result is in place for every stream of the device; until then the
// buffers belong to the call: do not write a send buffer nor read or
// write a receive buffer. A nonblocking GPU call never uses the IPC
// regions of the small blocking calls (coll/gpuipc.go), whose slots calls
// take in turn: it runs the point-to-point algorithms, so a small one
// costs a rendezvous per message.

// IallreduceGPU is the nonblocking AllreduceGPU.
func IallreduceGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) (*Request, error) {
	return idevCollective(c, "IallreduceGPU", coll.AllreduceGPU, allreduceGPU("IallreduceGPU", sendbuf, recvbuf, op))
}

// IreduceGPU is the nonblocking ReduceGPU.
func IreduceGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op, root int) (*Request, error) {
	return idevCollective(c, "IreduceGPU", coll.ReduceGPU, reduceGPU(c, "IreduceGPU", sendbuf, recvbuf, op, root))
}

// IbcastGPU is the nonblocking BcastGPU.
func IbcastGPU(c *Comm, buf gpu.Buffer, root int) (*Request, error) {
	return idevCollective(c, "IbcastGPU", coll.BcastGPU, bcastGPU(c, "IbcastGPU", buf, root))
}

// IallgatherGPU is the nonblocking AllgatherGPU.
func IallgatherGPU(c *Comm, sendbuf, recvbuf gpu.Buffer) (*Request, error) {
	return idevCollective(c, "IallgatherGPU", coll.AllgatherGPU, allgatherGPU(c, "IallgatherGPU", sendbuf, recvbuf))
}

// IallgathervGPU is the nonblocking AllgathervGPU.
func IallgathervGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, counts, displs []int) (*Request, error) {
	return idevCollective(c, "IallgathervGPU", coll.AllgathervGPU, allgathervGPU(c, "IallgathervGPU", sendbuf, recvbuf, counts, displs))
}

// IreduceScatterBlockGPU is the nonblocking ReduceScatterBlockGPU.
func IreduceScatterBlockGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) (*Request, error) {
	return idevCollective(c, "IreduceScatterBlockGPU", coll.ReduceScatterBlockGPU, reduceScatterBlockGPU(c, "IreduceScatterBlockGPU", sendbuf, recvbuf, op))
}

// IreduceScatterGPU is the nonblocking ReduceScatterGPU.
func IreduceScatterGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, recvcounts []int, op Op) (*Request, error) {
	return idevCollective(c, "IreduceScatterGPU", coll.ReduceScatterGPU, reduceScatterGPU(c, "IreduceScatterGPU", sendbuf, recvbuf, recvcounts, op))
}

// IgatherGPU is the nonblocking GatherGPU.
func IgatherGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, root int) (*Request, error) {
	return idevCollective(c, "IgatherGPU", coll.GatherGPU, rootedGPU(c, "IgatherGPU", sendbuf, recvbuf, root, true))
}

// IgathervGPU is the nonblocking GathervGPU.
func IgathervGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, counts, displs []int, root int) (*Request, error) {
	return idevCollective(c, "IgathervGPU", coll.GathervGPU, rootedvGPU(c, "IgathervGPU", sendbuf, recvbuf, counts, displs, root, true))
}

// IscatterGPU is the nonblocking ScatterGPU.
func IscatterGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, root int) (*Request, error) {
	return idevCollective(c, "IscatterGPU", coll.ScatterGPU, rootedGPU(c, "IscatterGPU", sendbuf, recvbuf, root, false))
}

// IscattervGPU is the nonblocking ScattervGPU.
func IscattervGPU(c *Comm, sendbuf gpu.Buffer, counts, displs []int, recvbuf gpu.Buffer, root int) (*Request, error) {
	return idevCollective(c, "IscattervGPU", coll.ScattervGPU, rootedvGPU(c, "IscattervGPU", sendbuf, recvbuf, counts, displs, root, false))
}

// IalltoallGPU is the nonblocking AlltoallGPU.
func IalltoallGPU(c *Comm, sendbuf, recvbuf gpu.Buffer) (*Request, error) {
	return idevCollective(c, "IalltoallGPU", coll.AlltoallGPU, alltoallGPU(c, "IalltoallGPU", sendbuf, recvbuf))
}

// IalltoallvGPU is the nonblocking AlltoallvGPU.
func IalltoallvGPU(c *Comm, sendbuf gpu.Buffer, sendcounts, sdispls []int, recvbuf gpu.Buffer, recvcounts, rdispls []int) (*Request, error) {
	return idevCollective(c, "IalltoallvGPU", coll.AlltoallvGPU, alltoallvGPU(c, "IalltoallvGPU", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
}

// IscanGPU is the nonblocking ScanGPU.
func IscanGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) (*Request, error) {
	return idevCollective(c, "IscanGPU", coll.ScanGPU, scanGPU("IscanGPU", sendbuf, recvbuf, op))
}

// IexscanGPU is the nonblocking ExscanGPU.
func IexscanGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) (*Request, error) {
	return idevCollective(c, "IexscanGPU", coll.ExscanGPU, scanGPU("IexscanGPU", sendbuf, recvbuf, op))
}
