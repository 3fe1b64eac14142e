package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/gpu/kernels"
)

// A Server is a device's resident kernel (kernels/reduce.cu, gorun_serve):
// push calls (AllreducePush, ReduceScatterPush, ReducePush, AllgatherPush,
// BcastPush with PushRegion.Server set) are handed to it through mapped
// host memory instead of each launching a kernel. A launch costs the host
// 3.4-4.8 µs and takes 8.3-9.7 µs to reach the GPU and come back, a word
// handed to a running kernel and its answer 3.3 µs (coll/MEASUREMENTS.md,
// GPU collectives, "A resident kernel"). The kernel is launched at the
// first call and ends by itself once it has waited idle for a call
// (ServerFor); the next call launches it again. While it runs it holds its
// grid (up to AllreducePushMaxBlocks blocks of 512 threads, as many as
// the device holds at once, at most 64 registers a thread: two blocks an
// SM; warp 0 of block 0 polls host memory, one thread a block polls device
// memory, the rest wait at a barrier), and a synchronization of the whole
// device waits for it to end. A launch whose grid does not all start
// within 2 ms (other kernels holding SMs, or limits on the SMs the process
// may use) takes no call: that call is launched instead, and so are the
// calls of the next second, and after it until the late blocks have ended
// (serveStartWait, serveOffFor).
//
// One call at a time: run holds the Server until its call is answered,
// so calls of several communicators on one device take turns, as they do
// on one stream.
type Server struct {
	mu      sync.Mutex
	dev     int
	idle    time.Duration
	blocks  int // the kernel's grid
	s       *cuda.Stream
	f       *cuda.Function
	host    *cuda.HostMem // svHostWords words, mapped for the device
	hb      []byte        // host's bytes
	words   Buffer        // device words: svDevWords u64
	seq     uint64        // the last call handed over
	gen     uint64        // launches so far
	running atomic.Bool   // launched, not seen ended (set and cleared under mu)
	broken  error         // a fault of the kernel: every later call fails with it
	args    cuda.KernelArgs
	// A launch whose grid did not all start within serveStartWait took no
	// call (kernels/reduce.cu, SV_UNRESIDENT): calls are launched until
	// offUntil, offFor later, and then until its late blocks have ended.
	offFor   time.Duration
	offUntil time.Time
}

// The words, as kernels/reduce.cu lays them out (SV_*, CMD_*, KIND_*).
const (
	svSeq, svExited, svAns, svBody = 0, 1, 2, 8
	svHostWords                    = svBody + 2*cmdWords
	svCount, svStarted             = 1, 2 // device words: blocks done, blocks started, this launch
	svDevWords                     = 8 + cmdWords
	cmdWords                       = 20
	kindAR, kindRS, kindRD         = 0, 1, 2
	kindAG, kindBC, kindQuit       = 3, 4, 5
	svNone                         = ^uint64(0) // SV_EXITED: no kernel ending
	svUnresident                   = ^uint64(1) // SV_EXITED: the grid did not all start
	serveThreads                   = 512        // gorun_serve's __launch_bounds__
)

// serveTypes and serveOps list the element types and operations in the
// order of the kernel's codes (SV_T_*, OP_*): a code is an index.
var (
	serveTypes = []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Uint8}
	serveOps   = []Op{Sum, Prod, Min, Max}
)

var servers struct {
	sync.Mutex
	m      map[int]*Server
	failed map[int]error // a device whose Server could not be made: not tried again
	holds  map[int]int   // HoldServer's holds by device: no launch meanwhile
}

// serverOf returns device dev's Server, or nil.
func serverOf(dev int) *Server {
	servers.Lock()
	defer servers.Unlock()
	return servers.m[dev]
}

// held reports whether device dev is held (HoldServer).
func held(dev int) bool {
	servers.Lock()
	defer servers.Unlock()
	return servers.holds[dev] > 0
}

// ServerFor returns device dev's Server, made at the first request, whose
// kernel ends after idle without a call (the idle of the first request
// made it). It returns nil where the loaded kernels have no resident
// kernel (a PTX from GORUN_GPU_PTX that predates it) or idle is not
// positive, and nil with the error where it could not be made (the same
// error again later, without trying again): the push calls then launch
// their kernels.
func ServerFor(dev int, idle time.Duration) (*Server, error) {
	if idle <= 0 {
		return nil, nil
	}
	servers.Lock()
	v, err := servers.m[dev], servers.failed[dev]
	servers.Unlock()
	if v != nil || err != nil {
		return v, err
	}
	if v, err = newServer(dev, idle); v == nil {
		if err != nil {
			servers.Lock()
			if servers.failed == nil {
				servers.failed = map[int]error{}
			}
			servers.failed[dev] = err
			servers.Unlock()
		}
		return nil, err
	}
	servers.Lock()
	if w := servers.m[dev]; w != nil {
		servers.Unlock()
		// Another goroutine's came first, and its kernel may run: a free
		// would wait for it.
		release := HoldServer(dev)
		v.free()
		release()
		return w, nil
	}
	if servers.m == nil {
		servers.m = map[int]*Server{}
	}
	servers.m[dev] = v
	servers.Unlock()
	return v, nil
}

// newServer makes a Server for device dev (nil where the kernels have no
// resident kernel, or where the process may be held to fewer SMs than the
// device has: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, under which the grid the
// occupancy allows might never be resident at once, and every launch
// would give up after serveStartWait; kernels/reduce.cu).
func newServer(dev int, idle time.Duration) (*Server, error) {
	if os.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") != "" {
		return nil, nil
	}
	ctx, err := DeviceContext(dev)
	if err != nil {
		return nil, err
	}
	ks, err := kernelsFor(ctx)
	if err != nil || ks.serve == nil {
		return nil, err
	}
	// The grid: as many blocks as the device holds at once, so that a
	// call's blocks never wait for each other's SMs (at most the push
	// kernels' largest grid; fewer take a call's blocks in turn).
	most, err := residentBlocks(ctx, ks.serve)
	if err != nil {
		return nil, err
	}
	v := &Server{dev: dev, idle: idle, f: ks.serve, blocks: min(kernels.AllreducePushMaxBlocks, most), offFor: serveOffFor}
	if v.blocks < 1 {
		return nil, nil
	}
	if v.host, err = ctx.HostAlloc(8*svHostWords, cuda.HostDeviceMap); err != nil {
		return nil, fmt.Errorf("gpu: resident kernel's host words: %w", err)
	}
	v.hb = v.host.Bytes()
	clear(v.hb)
	v.word(svExited).Store(svNone)
	if v.s, err = ctx.NewStream(); err == nil {
		if v.words, err = Alloc(dev, Uint8, 8*svDevWords); err == nil {
			if err = v.s.MemsetAsync(v.words.DevicePtr(), 0, 8*svDevWords); err == nil {
				err = v.s.Synchronize()
			}
		}
	}
	if err != nil {
		v.free()
		return nil, fmt.Errorf("gpu: resident kernel: %w", err)
	}
	return v, nil
}

// serveStartWait is how long block 0 of a launch waits for the rest of
// its grid to start before it gives up (a block may start late while
// other kernels hold SMs); serveOffFor, how long calls are launched after
// a launch gave up, before the next try.
const (
	serveStartWait = 2 * time.Millisecond
	serveOffFor    = time.Second
)

// residentBlocks is how many blocks of the resident kernel f the device of
// ctx holds at once.
func residentBlocks(ctx *cuda.Context, f *cuda.Function) (int, error) {
	perSM, err := f.BlocksPerSM(serveThreads, 0)
	if err != nil {
		return 0, fmt.Errorf("gpu: resident kernel: %w", err)
	}
	sms, err := ctx.Device().Attribute(cuda.AttrMultiprocessorCount)
	if err != nil {
		return 0, fmt.Errorf("gpu: resident kernel: %w", err)
	}
	return perSM * sms, nil
}

// free releases what newServer allocated, for a Server never launched.
func (v *Server) free() {
	if v.s != nil {
		_ = v.s.Destroy()
	}
	_ = v.words.Free() // nothing for a Buffer never allocated
	_ = v.host.Free()
}

// word is host word i.
func (v *Server) word(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&v.hb[8*i]))
}

// run hands one call (its words, CMD_*) to the kernel, launching it when it
// is not running, and returns once every block is done with the call: it
// completed, or gave up waiting (the error word of its PushRegion says
// which, as after a launch). It reports false, with nothing done, while
// the Server is held (HoldServer), when the launch gave up because its
// grid did not all start, and in the off time after that (offUntil): the
// caller launches the call instead.
func (v *Server) run(cmd *[cmdWords]uint64) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if held(v.dev) {
		return false, nil
	}
	if v.broken != nil {
		return true, v.broken
	}
	if !v.offUntil.IsZero() {
		// The last launch's grid did not all start: launched calls until
		// offUntil, and until its late blocks have ended.
		if time.Now().Before(v.offUntil) {
			return false, nil
		}
		done, err := v.s.Done()
		if err != nil {
			return true, v.fault(err)
		}
		if !done {
			return false, nil
		}
		v.offUntil = time.Time{}
		v.ended()
	}
	seq := v.post(cmd)
	if !v.running.Load() {
		if err := v.launch(seq - 1); err != nil {
			return true, err
		}
	}
	ans, exited := v.word(svAns), v.word(svExited)
	relaunched := false
	var t0 time.Time
	for i := 0; ; i++ {
		if ans.Load() == seq {
			return true, nil
		}
		if i&63 != 63 {
			continue
		}
		if exited.Load() == svUnresident {
			// Block 0 gave up waiting for the rest of the grid to start
			// and took no call (kernels/reduce.cu): the caller launches
			// this one, and the next until offUntil.
			return v.giveUp()
		}
		// The kernel ending (it found no call for idle and stored the
		// last it ran: Dekker's algorithm with svSeq, kernels/reduce.cu),
		// or now and then: a kernel that faulted answers nothing.
		ending := exited.Load() == seq-1
		if !ending {
			if i == 63 {
				t0 = time.Now()
				continue
			}
			if time.Since(t0) < time.Millisecond {
				continue
			}
			t0 = time.Now()
		}
		done, err := v.s.Done()
		if err != nil {
			v.running.Store(false)
			return true, v.fault(err)
		}
		if !done {
			continue
		}
		if ans.Load() == seq {
			v.running.Store(false)
			return true, nil
		}
		if exited.Load() == svUnresident {
			// It gave up (above) and ended between the two reads.
			return v.giveUp()
		}
		v.running.Store(false)
		if !ending {
			// Not a fault of the driver's; the kernel's bookkeeping is
			// off. Once more, from a fresh launch (its count reset).
			if relaunched {
				return true, fmt.Errorf("gpu: resident kernel on device %d ended twice without answering call %d", v.dev, seq)
			}
			relaunched = true
		}
		// It ended before it saw the call: launch it again.
		exited.Store(svNone)
		if err := v.launch(seq - 1); err != nil {
			return true, err
		}
	}
}

// giveUp is run's answer to a launch whose grid did not all start: the
// call is the caller's to launch, and so are the calls until offUntil.
func (v *Server) giveUp() (bool, error) {
	v.offUntil = time.Now().Add(v.offFor)
	return false, nil
}

// fault records err, a fault of the kernel's stream, as the Server's: it
// fails every later call. The caller holds mu.
func (v *Server) fault(err error) error {
	v.broken = fmt.Errorf("gpu: resident kernel on device %d: %w", v.dev, err)
	return v.broken
}

// ended records that the kernel has ended (its stream's work is done), so
// that the next call launches it again. The caller holds mu.
func (v *Server) ended() {
	v.running.Store(false)
	v.word(svExited).Store(svNone)
}

// post hands the next call over: its words, each as two halves tagged
// with the call's number (kernels/reduce.cu, serveFetch), then the
// number. The caller holds mu.
func (v *Server) post(cmd *[cmdWords]uint64) uint64 {
	v.seq++
	tag := uint64(uint32(v.seq)) << 32
	for i, x := range cmd {
		// plain stores: the XCHG of svSeq below orders them before it
		binary.LittleEndian.PutUint64(v.hb[8*(svBody+2*i):], tag|x&0xffffffff)
		binary.LittleEndian.PutUint64(v.hb[8*(svBody+2*i+1):], tag|x>>32)
	}
	v.word(svSeq).Store(v.seq)
	return v.seq
}

// launch starts the kernel, waiting for the call after last, with its
// counts of blocks done (a multiple of the grid between calls) and started
// reset.
func (v *Server) launch(last uint64) error {
	if err := v.s.MemsetAsync(v.words.DevicePtr()+8*svCount, 0, 8*(svStarted-svCount+1)); err != nil {
		return fmt.Errorf("gpu: launch the resident kernel on device %d: %w", v.dev, err)
	}
	v.gen++
	v.args.Reset()
	v.args.U64(uint64(v.host.Ptr()))
	v.args.U64(uint64(v.words.DevicePtr()))
	v.args.U64(last)
	v.args.U64(uint64(v.idle.Nanoseconds()))
	v.args.U64(v.gen)
	v.args.U64(uint64(serveStartWait.Nanoseconds()))
	if err := v.s.LaunchArgs(v.f, cuda.D1(v.blocks), cuda.D1(serveThreads), 0, &v.args); err != nil {
		return fmt.Errorf("gpu: launch the resident kernel on device %d: %w", v.dev, err)
	}
	v.running.Store(true)
	return nil
}

// HoldServer ends device dev's resident kernel, if it runs, once its call
// (if any) is over, and keeps it from being launched again until the
// returned function is called: push calls meanwhile launch their own
// kernels. Package gpu holds it around what waits for every stream of the
// device (Buffer.Free: cuMemFree, closing an IPC mapping), which would
// otherwise wait until the kernel ended by itself, or, while another
// goroutine kept handing it calls, longer; so do coll's close (a
// context's synchronization) and btl/cuda's unmapping.
func HoldServer(dev int) (release func()) {
	servers.Lock()
	if servers.holds == nil {
		servers.holds = map[int]int{}
	}
	servers.holds[dev]++ // before the Server's lock: a call after it launches
	v := servers.m[dev]
	servers.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			servers.Lock()
			servers.holds[dev]--
			servers.Unlock()
		})
	}
	if v == nil {
		return release
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.running.Load() {
		v.post(&[cmdWords]uint64{kindQuit})
		for {
			// It ends at once (or has ended after idle without a call:
			// either way the stream's work is done).
			done, err := v.s.Done()
			if err != nil {
				v.fault(err)
				break
			}
			if done {
				break
			}
			runtime.Gosched()
		}
		v.ended()
	}
	return release
}

// serveCall fills a call's words and hands it to reg.Server; false: there
// is none, or it did not take the call (Server.run), and the caller
// launches the call.
func serveCall(reg PushRegion, call PushCall, kind uint64, op Op, dt DType, in, out cuda.DevicePtr, n, stride uint64, root int, nvb int) (bool, error) {
	if reg.Server == nil {
		return false, nil
	}
	var cmd [cmdWords]uint64
	cmd[0] = kind
	if kind <= kindRD {
		o, t := slices.Index(serveOps, op), slices.Index(serveTypes, dt)
		if o < 0 || t < 0 {
			return true, errors.New("gpu: resident kernel: no such operation or type")
		}
		cmd[1], cmd[2] = uint64(o), uint64(t)
	}
	cmd[3], cmd[4], cmd[5], cmd[6], cmd[7] = uint64(reg.Table), uint64(in), uint64(out), n, stride
	cmd[8], cmd[9], cmd[10] = uint64(reg.Ranks), uint64(reg.Rank), uint64(max(root, 0))
	cmd[11], cmd[12], cmd[13] = call.Seq, call.wset(reg), call.Need
	cmd[14], cmd[15], cmd[16] = uint64(reg.Slot), uint64(reg.Flags), uint64(reg.Timeout.Nanoseconds())
	cmd[17], cmd[18], cmd[19] = uint64(reg.Words.Err()), uint64(reg.Words.Done()), uint64(nvb)
	return reg.Server.run(&cmd)
}
