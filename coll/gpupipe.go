package coll

import (
	"sync"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/p2p"
)

// The large GPU broadcast from three ranks on: a pipelined chain. On 4
// H100 over NVSwitch (MEASUREMENTS.md, "GPU collectives at four ranks") a
// copy from one GPU to another runs at about 395 GB/s, one GPU sending to
// every other at once no faster (its links' total), and every GPU sending
// to the next at once at 391: a chain, each link carrying the buffer once,
// all at once, takes one buffer time plus the segments in flight, where
// the binomial tree's root sends the whole buffer to two children at once
// (sharing its links) and its second level starts only once the whole
// buffer is in.

var gpuSegments = sync.OnceValue(func() int { return max(pGPUSegments(), 1) })

// gpuBcastPipe: a chain from the root (rank root+v sends to root+v+1), the
// buffer in segments, each forwarded as soon as it is in: every link
// carries the buffer once and the links work at once, (segments + n - 2)
// segment times where the binomial tree takes log2(n) whole-buffer times.
// Every receive is posted at the start, so segments flow in while earlier
// ones are forwarded.
func gpuBcastPipe(c *Comm, a *Args, _ *devCall) error {
	n, me := c.Size(), c.Rank()
	v := mod(me-a.Root, n)
	prev, next := mod(me-1, n), mod(me+1, n)
	counts, displs := pipeSegments(a.RecvD.Len(), a.Elem)
	seg := func(j int) gpu.Buffer { return bytesOf(a.RecvD, displs[j], counts[j]) }
	var sends pending
	if v == 0 {
		for j := range counts {
			if err := sends.sendD(c, seg(j), next); err != nil {
				return err
			}
		}
		return sends.wait(c)
	}
	recvs := make([]*p2p.Request, len(counts))
	for j := range counts {
		r, err := c.irecvMem(devMem(seg(j)), prev)
		if err != nil {
			return err
		}
		recvs[j] = r
	}
	for j := range counts {
		if err := c.waitRecv(recvs[j], prev, counts[j]); err != nil {
			return err
		}
		if v < n-1 {
			if err := sends.sendD(c, seg(j), next); err != nil {
				return err
			}
		}
	}
	return sends.wait(c)
}

// pipeSegments cuts total bytes (whole elements of elem) into about
// gpuSegments() segments of 2 to 32 MiB (GORUN_COLL_SEGSIZE, a test knob,
// overrides the size).
func pipeSegments(total, elem int) (counts, displs []int) {
	seg := segSize(min(max(total/gpuSegments(), 2<<20), 32<<20), elem)
	return blocks(total, max(1, (total+seg-1)/seg), elem)
}
