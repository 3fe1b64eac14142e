package mpi

import (
	"errors"
	"fmt"
	"github.com/gorun/gorun/coll"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun/gorun/btl"
	_ "github.com/gorun/gorun/btl/all" // the built-in transports register from init
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/launcher/boot"
	"github.com/gorun/gorun/p2p"
)

// pFakeHosts splits one machine into pretend hosts, for tests of what
// only runs across hosts (the GPU staging pipeline between ranks, the
// hierarchical collectives over a real network transport) where no
// second host is at hand: a GPU host. Unlike GORUN_COLL_FAKE_NODES, which
// only the collectives' algorithms see, it changes the host id that every
// transport and communicator reads.
var pFakeHosts = params.Int("GORUN_FAKE_HOSTS", 0,
	"testing: world rank r acts as if it ran on host r mod N (N > 1): shared memory and CUDA IPC do not connect ranks of different pretend hosts (TCP does), and communicators see N nodes")

// rt is the state between Init and Finalize.
type rt struct {
	env   *boot.Env
	eng   *p2p.Engine
	sess  *boot.Session
	world *Comm
	self  *Comm
	ft    ftProc
	// helpers run the nonblocking calls (launch); nbq holds those
	// deferred.
	helpers helperPool
	nbq     nbQueue
}

var (
	stateMu sync.Mutex
	// live mirrors state for the checks every call makes, without the
	// mutex.
	live      atomic.Pointer[rt]
	state     *rt
	finalized bool
	t0        = time.Now()
)

// Init wires this process into its job: it reads its place from gorun's
// environment, opens the transports, joins the membership and returns once
// every peer can be reached and every rank has reached the end of its
// Init (a barrier on the world, which sets the world's collectives up;
// not under --enable-recovery). Without gorun it makes a singleton
// world. If that barrier fails (a rank died while the others started),
// Init returns its error with MPI initialized: Abort and Finalize still
// work.
func Init() error {
	s, err := initLocked()
	if err != nil {
		return err
	}
	// Outside stateMu: the barrier lasts until the last rank has
	// started, and Abort, World and Initialized take the lock. Under
	// --enable-recovery a rank that died while the others started must
	// not fail the survivors' Init (they Shrink it away later), so
	// there is no barrier; the set-up comes at the first call.
	if s.env.Size > 1 && !s.env.Recovery {
		if err := s.world.startBarrier(); err != nil {
			return wrap("Init", err)
		}
	}
	return nil
}

// initLocked is Init up to its closing barrier, under stateMu.
func initLocked() (*rt, error) {
	stateMu.Lock()
	defer stateMu.Unlock()
	if state != nil || finalized {
		return nil, errorf(ErrOther, "Init", "Init may be called only once")
	}
	env, err := boot.ReadEnv()
	if err != nil {
		return nil, wrap("Init", err)
	}
	if n := pFakeHosts(); n > 1 {
		env.HostID = fmt.Sprintf("%s~pretend%d", env.HostID, env.Rank%n)
	}
	holdGCFloor()
	list := btl.Enabled()
	if env.Size == 1 {
		list = "self"
	}
	filter, err := btl.ParseFilter(list)
	if err != nil {
		return nil, errorf(ErrArg, "Init", "GORUN_BTL: %w", err)
	}
	eng := p2p.Alloc(env.Rank, env.Size)
	coll.SetJob(env.JobID)
	place := env.Placement()
	benv := btl.Env{
		Rank: env.Rank, Size: env.Size, JobID: env.JobID, HostID: env.HostID,
		Placement: btlPlacement(place),
		Secret:    env.Secret, BindAddr: env.BindAddr, Handler: p2p.Handler(eng),
	}
	mods, unopened, err := btl.OpenAll(benv, filter)
	if err != nil {
		return nil, wrap("Init", err)
	}
	eng.NotOpened(unopened)
	card := boot.Card{Rank: env.Rank, PID: os.Getpid(), HostID: env.HostID, Addrs: map[string][]byte{}, Placement: place}
	for _, m := range mods {
		if a := m.Address(); a != nil {
			card.Addrs[m.Name()] = a
		}
	}
	sess, err := boot.Join(env, card)
	if err != nil {
		for _, m := range mods {
			m.Close()
		}
		return nil, wrap("Init", err)
	}
	cards := sess.Roster().Cards
	peers := make([]btl.Peer, env.Size)
	for i, c := range cards {
		if c.Rank != i {
			return nil, errorf(ErrIntern, "Init", "roster entry %d holds rank %d", i, c.Rank)
		}
		peers[i] = btl.Peer{Rank: c.Rank, HostID: c.HostID, PID: c.PID, Placement: btlPlacement(c.Placement), Addrs: c.Addrs}
	}
	own := 0
	if pFakeHosts() <= 1 && ownGPUs(cards, env.HostID) { // pretend hosts share the real one's GPUs
		own = len(place.GPUs)
	}
	coll.SetLocalRanks(env.LocalSize, own)
	if testHookTransports != nil {
		testHookTransports(benv, peers)
	}
	if err := eng.Attach(mods, peers); err != nil {
		return nil, wrap("Init", err)
	}
	s := &rt{env: env, eng: eng, sess: sess}
	eng.SetStarter(s.begin)
	ctxs.mu.Lock()
	ctxs.purge = func(ctx uint32) {
		eng.Purge(ctx, fmt.Errorf("its communicator was freed, and the context id serves another one now (%w)", p2p.ErrFreed))
	}
	ctxs.mu.Unlock()
	sess.OnFailure(func(rank int, err error, declared bool) {
		// The failure detector's own verdict (declared false) is not
		// acted on: it means only that the peer has not answered for a
		// while, which a live but busy rank does under load (np=8 on 2
		// busy cores, a host loaded with CPU hogs). A rank that really
		// died is seen by the transports (connection closed, pidfd), and
		// gorun, which knows the process's state on every host, ends the
		// job or, under --enable-recovery, declares it failed: the
		// process is gone or being killed (ulfm.go).
		if declared && s.noteFailed(rank) {
			go s.declared(rank, err)
		}
	})
	sess.OnRevoke(func(ctx uint32) { go s.onRevoke(ctx) })
	world := make([]int, env.Size)
	for i := range world {
		world[i] = i
	}
	state = s
	state.world = newComm("MPI_COMM_WORLD", state, 0, world, env.Rank)
	coll.SetRetire(&state.world.cc) // the channel of freed GPU regions' notices
	state.self = newComm("MPI_COMM_SELF", state, 2, []int{env.Rank}, 0)
	live.Store(state)
	return s, nil
}

// startBarrier is Init's last step, a barrier on the world: the ranks
// leave Init together, not as each finished its own start (up to tens of
// milliseconds apart at np=16), and with the world's collective set-up
// done (its shared-memory segment and the connections its messages make),
// which the program's first collective call on the world paid before:
// 11-17 ms at np=16 on the lent 16-core host, mostly the wait for the
// last rank to start (docs/measurements.md, "The first call's set-up").
// Every program pays the set-up anyway: Finalize ends with a barrier on
// the world.
func (c *Comm) startBarrier() error {
	r, err := c.beginRun("Init")
	if err != nil {
		return err
	}
	r.cl.fn = barrierFn
	return finish("Init", r, nil)
}

// ownGPUs reports whether every rank on host sees at least one GPU and
// none that another rank there sees (their placements' PCI bus ids: each
// rank's CUDA_VISIBLE_DEVICES set apart), so that no two can share a GPU.
// An unknown list (empty: no driver, GPUs of several models without
// CUDA_DEVICE_ORDER, MIG instances) counts as none.
func ownGPUs(cards []boot.Card, host string) bool {
	seen := map[string]bool{}
	for _, c := range cards {
		if c.HostID != host {
			continue
		}
		if len(c.Placement.GPUs) == 0 {
			return false
		}
		for _, g := range c.Placement.GPUs {
			if seen[g] {
				return false
			}
			seen[g] = true
		}
	}
	return len(seen) > 0
}

// btlPlacement is a business card's placement as the transports take it.
func btlPlacement(p boot.Placement) btl.Placement {
	return btl.Placement{LocalRank: p.LocalRank, LocalSize: p.LocalSize, NUMA: p.NUMA, GPUs: p.GPUs, NICs: p.NICs}
}

// testHookTransports, when set (by this package's tests only), sees what
// Init hands the transports: this rank's btl.Env and every rank's
// btl.Peer, once the roster has arrived.
var testHookTransports func(own btl.Env, peers []btl.Peer)

// Initialized reports whether Init has completed and Finalize not yet.
func Initialized() bool {
	stateMu.Lock()
	defer stateMu.Unlock()
	return state != nil
}

func current(op string) (*rt, error) {
	stateMu.Lock()
	s, fin := state, finalized
	stateMu.Unlock()
	if s == nil {
		return nil, notLive(op, fin)
	}
	return s, nil
}

// notLive is the error of a call made while mpi is not initialized: before
// Init, or after Finalize.
func notLive(op string, fin bool) error {
	if fin {
		return errorf(ErrNotInit, op, "mpi.Finalize was called: package mpi cannot be used afterwards")
	}
	return errorf(ErrNotInit, op, "call mpi.Init first")
}

// Finalize waits for every rank (it is collective over the world), tells
// gorun this rank is done, and releases the transports. Its barrier is
// its own, never one of the program's calls (coll.FinalizeBarrier): a
// collective that other ranks wait in and this rank never called fails
// there, naming this rank, once they have waited GORUN_COLL_STALL (with
// the stall check off, GORUN_COLL_STALL=0, they wait). Deferred directly
// (defer mpi.Finalize()) in a rank that panics, it lets the panic go on
// at once; through a wrapper (defer func() { mpi.Finalize() }()) it
// cannot tell, and runs. Nothing of this
// package may be used afterwards. First, as MPI_Finalize does, it deletes
// Self's attributes, so that their DeleteFuncs run (in the reverse order
// the attributes were set): code that must run at the end, while MPI still
// works, sets one.
func Finalize() error {
	// Deferred (defer mpi.Finalize(), the idiom) in a rank that panics:
	// the panic goes on at once, as without the defer, and gorun ends the
	// job with the rank's status. Finalize's barrier would otherwise have
	// run on the world at a rank the program had left: it completed the
	// others' Barrier or Bcast, failed their Allreduce with mismatched
	// counts, or kept a rank waiting in Recv, and the job hung without
	// the panic's message. (recover sees the panic only in a function
	// that a defer calls directly, as this idiom does.)
	if p := recover(); p != nil {
		panic(p)
	}
	s, err := current("Finalize")
	if err != nil {
		return err
	}
	// MPI's hook for user code at process termination: before anything
	// else, MPI_COMM_SELF's attributes are deleted, their delete callbacks
	// run in the reverse order the attributes were set (a failing one
	// stops the deletion, and its error is Finalize's once the rest is done).
	aerr := s.self.deleteAllAttrs("Finalize")
	// Nonblocking calls never waited for (an erroneous program) still
	// run, as they would have on a helper from the start (launch).
	s.begin()
	// Buffered sends still in flight are delivered first, as if the
	// buffer were detached (bsend.go); their error, if any, is Finalize's.
	berr := errors.Join(aerr, flushBsend())
	if s.env.Recovery {
		// Failed ranks will not come: agree through gorun, which
		// counts only the live ones (ulfm.go).
		_, _, err = s.world.agree("Finalize", []uint64{1})
	} else {
		err = wrapColl("Finalize", coll.FinalizeBarrier(&s.world.cc))
	}
	if berr == nil {
		berr = err
	}
	if coll.Reporting() {
		fmt.Fprintf(os.Stderr, "gorun: rank %d: collectives: %s\n", s.world.Rank(), coll.Report())
	}
	stateMu.Lock()
	state, finalized = nil, true
	live.Store(nil)
	stateMu.Unlock()
	s.helpers.close()
	ferr := s.sess.Finalized()
	cerr := s.eng.Close()
	s.sess.Close()
	switch {
	case berr != nil:
		return wrap("Finalize", berr)
	case ferr != nil:
		return wrap("Finalize", fmt.Errorf("tell gorun: %w", ferr))
	default:
		return wrap("Finalize", cerr)
	}
}

// World returns MPI_COMM_WORLD. Before Init, or after Finalize, it
// returns a communicator of no process instead (nothing in this package
// panics): its Rank is Undefined and its Size 0, and every call given it
// fails with ErrNotInit, saying whether Init was never called or Finalize
// was.
func World() *Comm {
	s, err := current("World")
	if err != nil {
		return deadComm("MPI_COMM_WORLD")
	}
	return s.world
}

// Self returns MPI_COMM_SELF, the communicator of this process alone;
// before Init or after Finalize, a communicator of no process, as World.
func Self() *Comm {
	s, err := current("Self")
	if err != nil {
		return deadComm("MPI_COMM_SELF")
	}
	return s.self
}

// deadComm is what World and Self return while mpi is not initialized: a
// communicator without runtime, which Comm.check refuses.
func deadComm(name string) *Comm {
	return &Comm{name: name, rank: Undefined}
}

// Abort ends the whole job with code: gorun stops every rank and exits with
// code. It does not return. c names the communicator as in MPI_Abort; the
// whole job ends whatever it is.
func Abort(c *Comm, code int) { abortJob(code, "") }

// abortJob ends the whole job with code, as Abort does; why, when set,
// says what ended it instead of a call of mpi.Abort (an error handler).
func abortJob(code int, why string) {
	stateMu.Lock()
	s := state
	stateMu.Unlock()
	switch {
	case s != nil && !s.env.Singleton:
		// gorun names the rank and the code in its one line.
		s.sess.Abort(code, why)
	case why != "":
		fmt.Fprintf(os.Stderr, "%s (status %d)\n", why, code)
	default:
		fmt.Fprintf(os.Stderr, "mpi.Abort(%d)\n", code)
	}
	os.Exit(code)
}

// Wtime returns the seconds elapsed since an arbitrary moment in this
// process's past, from a monotonic clock. The nanoseconds are scaled by a
// multiplication: Duration.Seconds splits them into seconds and a
// remainder (a division and a modulo), 5 ns of its 31 a call on the
// 2-core VM, where C's MPI_Wtime takes 26 (BenchmarkWtime; OSU's
// collective loops read the clock twice a call, and a barrier of two
// ranks takes ~160 ns there). A float64 holds the nanoseconds exactly
// for 104 days; the product is within an ulp of the quotient.
func Wtime() float64 { return float64(time.Since(t0)) * 1e-9 }

// Wtick returns Wtime's resolution in seconds.
func Wtick() float64 { return 1e-9 }

// ProcessorName returns the name of the host this rank runs on.
func ProcessorName() string {
	h, _ := os.Hostname()
	return h
}
