package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorun/gorun/gpu/cuda"
)

// Probe holds copy bandwidths measured between every pair of GPUs, in GB/s
// (10^9 B/s), indexed by NVML index like Topology.GPUs; 0 where a pair was
// not measured (a GPU CUDA does not see).
type Probe struct {
	// Bytes is the size of each copy, Iters how many were timed.
	Bytes, Iters int
	// OneWay[i][j] is the rate of copies from GPU i to GPU j alone.
	OneWay [][]float64
	// BothWays[i][j] is the combined rate of copies i→j and j→i at once.
	BothWays [][]float64
}

// ProbeBandwidth measures, for every GPU pair, the copy bandwidth one way
// and both ways at once, with copies of the given size (256 MiB when 0)
// repeated iters times (10 when 0) after a warm-up. Copies take the route
// the runtime would take (Topology.Route): peer access is enabled for peer
// routes, else the driver stages through host memory. Within one process;
// the IPC benchmark in the tests measures the same across two.
//
// It allocates two buffers of bytes on every GPU and keeps every copy
// engine busy while it runs: not for use while a job runs.
func ProbeBandwidth(t *Topology, bytes, iters int) (*Probe, error) {
	if bytes <= 0 {
		bytes = 256 << 20
	}
	if iters <= 0 {
		iters = 10
	}
	n := len(t.GPUs)
	p := &Probe{Bytes: bytes, Iters: iters, OneWay: square(n), BothWays: square(n)}
	type side struct {
		ctx      *cuda.Context
		src, dst cuda.DevicePtr
		s        *cuda.Stream
	}
	sides := make([]*side, n)
	defer func() {
		for _, sd := range sides {
			if sd == nil {
				continue
			}
			if sd.s != nil {
				_ = sd.s.Destroy()
			}
			for _, m := range []cuda.DevicePtr{sd.src, sd.dst} {
				if m != 0 {
					_ = sd.ctx.MemFree(m)
				}
			}
		}
	}()
	for i, g := range t.GPUs {
		if g.CUDA < 0 {
			continue
		}
		c, err := DeviceContext(g.CUDA)
		if err != nil {
			return nil, fmt.Errorf("gpu: probe: %w", err)
		}
		sd := &side{ctx: c}
		sides[i] = sd
		if sd.src, err = c.MemAlloc(bytes); err != nil {
			return nil, fmt.Errorf("gpu: probe GPU%d: %w", i, err)
		}
		if sd.dst, err = c.MemAlloc(bytes); err != nil {
			return nil, fmt.Errorf("gpu: probe GPU%d: %w", i, err)
		}
		if err := c.Memset(sd.src, byte(i+1), bytes); err != nil {
			return nil, fmt.Errorf("gpu: probe GPU%d: %w", i, err)
		}
		if sd.s, err = c.NewStream(); err != nil {
			return nil, fmt.Errorf("gpu: probe GPU%d: %w", i, err)
		}
	}
	// push queues k copies from GPU a to GPU b on a's stream.
	push := func(a, b, k int) error {
		for ; k > 0; k-- {
			if err := sides[a].s.CopyPeerAsync(sides[b].dst, sides[b].ctx, sides[a].src, sides[a].ctx, bytes); err != nil {
				return fmt.Errorf("gpu: probe GPU%d to GPU%d: %w", a, b, err)
			}
		}
		return nil
	}
	sync := func(ids ...int) error {
		var errs []error
		for _, id := range ids {
			errs = append(errs, sides[id].s.Synchronize())
		}
		return errors.Join(errs...)
	}
	rate := func(d time.Duration, copies int) float64 {
		return float64(bytes) * float64(copies) / d.Seconds() / 1e9
	}
	for i := range t.GPUs {
		for j := range t.GPUs {
			if i == j || sides[i] == nil || sides[j] == nil {
				continue
			}
			if t.Route(i, j) != RouteHostStaging {
				if err := sides[i].ctx.EnablePeerAccess(sides[j].ctx); err != nil {
					return nil, fmt.Errorf("gpu: probe: %w", err)
				}
			}
			if err := push(i, j, 2); err != nil {
				return nil, err
			}
			if err := sync(i); err != nil {
				return nil, fmt.Errorf("gpu: probe GPU%d to GPU%d: %w", i, j, err)
			}
			t0 := time.Now()
			if err := push(i, j, iters); err != nil {
				return nil, err
			}
			if err := sync(i); err != nil {
				return nil, fmt.Errorf("gpu: probe GPU%d to GPU%d: %w", i, j, err)
			}
			p.OneWay[i][j] = rate(time.Since(t0), iters)
		}
	}
	for i := range t.GPUs {
		for j := i + 1; j < len(t.GPUs); j++ {
			if sides[i] == nil || sides[j] == nil {
				continue
			}
			t0 := time.Now()
			if err := push(i, j, iters); err != nil {
				return nil, err
			}
			if err := push(j, i, iters); err != nil {
				return nil, err
			}
			if err := sync(i, j); err != nil {
				return nil, fmt.Errorf("gpu: probe GPU%d and GPU%d: %w", i, j, err)
			}
			r := rate(time.Since(t0), 2*iters)
			p.BothWays[i][j], p.BothWays[j][i] = r, r
		}
	}
	return p, nil
}

// square makes an n×n matrix of zeros.
func square(n int) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
	}
	return m
}
