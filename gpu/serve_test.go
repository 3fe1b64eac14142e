package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestGPUServe runs push calls on the devices' resident kernels (Server)
// among up to two GPUs of this process, one goroutine a GPU: allreduce,
// allgather and bcast of 4 B to 1 MiB back to back; calls after a pause
// longer than the kernels' idle time (each ends, and the next call
// launches it again, through the race of kernels/reduce.cu's Dekker
// protocol); a GPU whose calls are launched beside one whose calls are
// served; a GPU 10 ms late with 2 ms timeouts (the served call gives up,
// is handed over again and resumes). Every result is checked against the
// values the host computes, fresh for every call; at the end both kernels
// must have ended by themselves.
func TestGPUServe(t *testing.T) {
	n := requireGPU(t, 1)
	ranks := min(n, 2)
	for d := range ranks {
		must(t, LoadKernels(d))
	}
	const idle = 200 * time.Microsecond
	srv := make([]*Server, ranks)
	for d := range ranks {
		v, err := ServerFor(d, idle)
		must(t, err)
		if v == nil {
			t.Skip("the loaded kernels have no resident kernel (gorun_serve)")
		}
		srv[d] = v
	}
	g := newFloorGroup(t, ranks)
	defer g.free()
	type step struct {
		coll   string
		size   int // bytes a rank
		served []bool
		pause  time.Duration // before the call
		late   time.Duration // the last rank's delay
		stop   bool          // StopServer after the call
	}
	all, mixed := []bool{true, true}, []bool{true, false}
	var steps []step
	for _, coll := range []string{"allreduce", "allgather", "bcast"} {
		for _, size := range []int{4, 1000, 64 << 10, 1 << 20} {
			steps = append(steps, step{coll: coll, size: size, served: all})
		}
		steps = append(steps, step{coll: coll, size: 8, served: all, pause: 2 * time.Millisecond},
			step{coll: coll, size: 8, served: all, pause: 2 * time.Millisecond},
			step{coll: coll, size: 64, served: all, stop: true}, step{coll: coll, size: 64, served: all})
		if ranks == 2 {
			steps = append(steps, step{coll: coll, size: 4096, served: mixed}, step{coll: coll, size: 4096, served: []bool{false, true}},
				step{coll: coll, size: 256 << 10, served: all, late: 10 * time.Millisecond})
		}
	}
	for i, st := range steps {
		name := fmt.Sprintf("step %d (%s of %d B, served %v, pause %v, late %v)", i, st.coll, st.size, st.served[:ranks], st.pause, st.late)
		pc := g.next()
		root := ranks - 1
		m := st.size / 4
		value := func(d, k int) float32 { return float32((i*131+d*17+k)%977 + 1) }
		for d := range ranks {
			in := make([]float32, m)
			for k := range in {
				in[k] = value(d, k)
			}
			must(t, Upload(g.in[d].Slice(0, m), in))
			must(t, g.out[d].CopyFromHost(make([]byte, ranks*st.size)))
			if st.coll == "bcast" && d == root {
				must(t, Upload(g.out[d].Slice(0, m), in))
			}
		}
		timeout := time.Second
		if st.late > 0 {
			timeout = 2 * time.Millisecond
		}
		var bar spinBarrier
		bar.n = int32(ranks)
		errs := make([]error, ranks)
		gaveUp := make([]int, ranks)
		var wg sync.WaitGroup
		for d := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				reg := g.reg[d]
				reg.Timeout = timeout
				if st.served[d] {
					reg.Server = srv[d]
				}
				bar.wait()
				time.Sleep(st.pause)
				if d == ranks-1 {
					time.Sleep(st.late)
				}
				for {
					var err error
					switch st.coll {
					case "allreduce":
						err = AllreducePush(g.streams[d], Sum, reg, pc, g.in[d].Slice(0, m), g.out[d].Slice(0, m))
					case "allgather":
						err = AllgatherPush(g.streams[d], reg, pc, asBytes(g.in[d].Slice(0, m)), asBytes(g.out[d].Slice(0, ranks*m)))
					case "bcast":
						err = BcastPush(g.streams[d], reg, pc, root, asBytes(g.out[d].Slice(0, m)))
					}
					if err != nil {
						errs[d] = err
						return
					}
					again, err := g.words[d].Wait(g.streams[d], pc.Seq, time.Millisecond)
					if err != nil || !again {
						errs[d] = err
						if err == nil && st.stop {
							errs[d] = stopped(srv[d])
						}
						return
					}
					if gaveUp[d]++; gaveUp[d] > 100 {
						errs[d] = fmt.Errorf("device %d gave up waiting %d times", d, gaveUp[d])
						return
					}
				}
			}()
		}
		wg.Wait()
		for d, err := range errs {
			if err != nil {
				t.Fatalf("%s: device %d: %v", name, d, err)
			}
		}
		if st.late > 0 && st.served[0] && gaveUp[0] == 0 {
			t.Errorf("%s: device 0 never gave up waiting for the late device", name)
		}
		for d := range ranks {
			want := make([]float32, 0, ranks*m)
			switch st.coll {
			case "allreduce":
				for k := range m {
					s := float32(0)
					for p := range ranks {
						s += value(p, k)
					}
					want = append(want, s)
				}
			case "allgather":
				for p := range ranks {
					for k := range m {
						want = append(want, value(p, k))
					}
				}
			case "bcast":
				for k := range m {
					want = append(want, value(root, k))
				}
			}
			got := make([]float32, len(want))
			must(t, Download(got, g.out[d].Slice(0, len(want))))
			for k := range got {
				if got[k] != want[k] {
					t.Fatalf("%s: device %d: element %d of %d is %v, want %v", name, d, k, len(got), got[k], want[k])
				}
			}
		}
	}
	time.Sleep(20 * idle)
	for d, v := range srv {
		done, err := v.s.Done()
		must(t, err)
		if !done {
			t.Errorf("device %d: the resident kernel still runs %v after the last call (idle %v)", d, 20*idle, idle)
		}
		if v.gen < 2 {
			t.Errorf("device %d: the resident kernel was launched %d times; the pauses should have ended it", d, v.gen)
		}
	}
}

// stopped stops v's kernel and checks that it has ended.
func stopped(v *Server) error {
	StopServer(v.dev)
	done, err := v.s.Done()
	if err == nil && (!done || v.running.Load()) {
		err = fmt.Errorf("device %d: the resident kernel still runs after StopServer", v.dev)
	}
	return err
}

// asBytes is b as bytes (the allgather and bcast kernels move bytes).
func asBytes(b Buffer) Buffer { return Wrap(b.dev, b.ptr, Uint8, b.bytes) }
