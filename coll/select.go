package coll

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gorun/gorun/internal/params"
)

// algorithm is one way to run a collective, with what it requires of the
// call.
type algorithm struct {
	name string
	run  func(*Comm, *Args) error
	// commutative: the operation must be commutative; pow2: the size must
	// be a power of two; hier: the communicator must span several nodes;
	// shm: a shared-memory algorithm (shm.go), for blocking calls within
	// one host up to the slot size.
	commutative, pow2, hier, shm bool
	// shmBytes, when set, is what a shm algorithm puts in its slot for a
	// call of size bytes on n ranks, where that is not the collective's
	// size (alltoall: every block); a function of the two alone, so that
	// the pick can be remembered by size as any other.
	shmBytes func(n, size int) int
}

func (al *algorithm) applies(c *Comm, a *Args, size int) bool {
	n := c.Size()
	if al.shmBytes != nil {
		size = al.shmBytes(n, size)
	}
	return (!al.commutative || a.commutative()) &&
		(!al.pow2 || n&(n-1) == 0) &&
		(!al.hier || c.multiNode()) &&
		(!al.shm || shmApplies(c, a, size))
}

// collective is one MPI collective: its algorithms, its selection table
// and its override.
type collective struct {
	name string
	algs []algorithm
	// table picks the flat (single-level) algorithm for a call; size is
	// the call's message size as entry.go defines it per collective.
	table func(n, size int, commutative bool) string
	// size is the message size the table looks at.
	size func(c *Comm, a *Args) int
	// varSize: the ranks' sizes legitimately differ (the v forms), so a
	// stall query compares algorithms only.
	varSize bool
	param   func() string
	id      uint16 // index in collList
	// memoOff: pick does not remember choices (the key cannot hold the
	// override).
	memoOff bool

	once sync.Once
	// ran counts the calls of each algorithm (report.go).
	ran []atomic.Uint64
}

// collectives by name (lower case, as in GORUN_COLL_<NAME>), and in
// registration order.
var (
	collectives = map[string]*collective{}
	collList    []*collective
)

// algName names algorithm r.alg of collective r.coll, for messages.
func algName(r callRec) string {
	if r.coll == neighborID {
		return "neighbor/linear"
	}
	if int(r.coll) < len(collList) {
		k := collList[r.coll]
		if int(r.alg) < len(k.algs) {
			return k.name + "/" + k.algs[r.alg].name
		}
	}
	return fmt.Sprintf("collective %d/algorithm %d", r.coll, r.alg)
}

func register(k *collective) *collective {
	if len(collList) == maxColls {
		panic("coll: more collectives than maxColls")
	}
	k.id = uint16(len(collList))
	collList = append(collList, k)
	k.ran = make([]atomic.Uint64, len(k.algs))
	// The key holds the override in 6 bits and the choice in 7.
	k.memoOff = len(k.algs) >= 1<<6
	var names []string
	for _, a := range k.algs {
		names = append(names, a.name)
	}
	env := "GORUN_COLL_" + strings.ToUpper(k.name)
	k.param = params.String(env, "",
		fmt.Sprintf("force the %s algorithm: %s (empty: the measured table; an algorithm that does not apply to a call falls back to it)", k.name, strings.Join(names, ", ")))
	collectives[k.name] = k
	return k
}

func (k *collective) find(name string) int {
	return slices.IndexFunc(k.algs, func(a algorithm) bool { return a.name == name })
}

// load reads the override from the environment once.
func (k *collective) load() {
	k.once.Do(func() {
		v := strings.TrimSpace(strings.ToLower(k.param()))
		if v == "" {
			return
		}
		i := k.find(v)
		if i < 0 {
			fmt.Fprintf(os.Stderr, "gorun: ignoring GORUN_COLL_%s=%q: not one of %v\n", strings.ToUpper(k.name), v, Algorithms(k.name))
			return
		}
		setForced(k.id, int32(i+1))
	})
}

// Forced holds each collective's override (by id): 1 + the index of the
// forced algorithm, 0 for none. The one in force is replaced whole, never
// written, so that a nonblocking call can keep the one of its start
// (Args.Forced): it picks its algorithm wherever it then runs (a helper,
// its Wait), and a SetAlgorithm between its start and that, made alike
// at every rank, must not make the ranks pick apart.
type Forced [maxColls]int32

var (
	forced   atomic.Pointer[Forced] // never nil (init)
	forcedMu sync.Mutex             // serialises the replacements
	loadAll  sync.Once
)

func init() { forced.Store(new(Forced)) }

// setForced replaces the overrides in force with a copy where id's is f.
func setForced(id uint16, f int32) {
	forcedMu.Lock()
	defer forcedMu.Unlock()
	t := *forced.Load()
	t[id] = f
	forced.Store(&t)
}

// Overrides returns the overrides in force now (every collective's
// environment read first), for a nonblocking call's Args.Forced.
func Overrides() *Forced {
	loadAll.Do(func() {
		for _, k := range collList {
			k.load()
		}
	})
	return forced.Load()
}

// forcedOf is k's override for a call with args a: its snapshot's, or
// the one in force.
func (k *collective) forcedOf(a *Args) int32 {
	t := a.Forced
	if t == nil {
		t = forced.Load()
	}
	return t[k.id]
}

// maxColls bounds the registered collectives (register checks it).
const maxColls = 64

// pick chooses the algorithm of a call (its index in k.algs): the
// override if it applies, else the hierarchical algorithm when the
// communicator spans several nodes, else the table's. On the whole
// communicator the choice is remembered with what it depends on beyond
// the communicator (pickKey): a call like the last one (a loop of them)
// takes it back in one load, where choosing took 7% of an 8-byte
// allreduce at np=2 (docs/measurements.md).
func (k *collective) pick(c *Comm, a *Args) int {
	k.load()
	size := k.size(c, a)
	forced := k.forcedOf(a)
	key, memo := k.pickKey(c, a, size, forced)
	if memo {
		if v := c.sh.picks[k.id].Load(); v&^pickAlgMask == key {
			return int(v & pickAlgMask)
		}
	}
	i := k.choose(c, a, size, int(forced)-1)
	if memo {
		c.sh.picks[k.id].Store(key | uint64(i))
	}
	return i
}

// forgetPicks drops every remembered pick on the communicator (a key is
// never 0), for when what they depend on changes (the shared-memory
// set-up, shmPrepare).
func (s *shared) forgetPicks() {
	for i := range s.picks {
		s.picks[i].Store(0)
	}
}

// pickAlgMask is the algorithm's index in a remembered pick (the key
// above it).
const pickAlgMask = 1<<7 - 1

// pickKey packs what a pick depends on besides the communicator itself:
// the size, the operation's commutativity, a nonblocking call and
// whether it may run in shared memory (Args.ShmReady), the override (1 +
// its index, at most len(k.algs)). memo is false where the
// key cannot hold the size, where c is a view of part of the communicator
// (an algorithm's phase: other ranks, other nodes), or for a collective
// whose picks are not remembered (memoOff).
func (k *collective) pickKey(c *Comm, a *Args, size int, forced int32) (key uint64, memo bool) {
	if k.memoOff || c.sh == nil || len(c.World) != len(c.sh.world) || size < 0 || size >= 1<<40 {
		return 0, false
	}
	key = 1<<63 | uint64(size)<<16 | uint64(forced)<<8
	if a.commutative() {
		key |= 1 << 7
	}
	if a.Nonblocking {
		key |= 1 << 15
		if a.ShmReady {
			key |= 1 << 14
		}
	}
	return key, true
}

// choose is pick's choice, made afresh; forced is the override's index
// (-1: none).
func (k *collective) choose(c *Comm, a *Args, size, forced int) int {
	if forced >= 0 && k.algs[forced].applies(c, a, size) {
		return forced
	}
	for i := range k.algs {
		if (k.algs[i].hier || k.algs[i].shm) && k.algs[i].applies(c, a, size) {
			return i
		}
	}
	return k.flat(c, a)
}

// flat is the table's choice among the point-to-point algorithms, never
// hierarchical nor in shared memory (the levels of a hierarchical
// algorithm and the set-up exchanges of shm.go and gpuipc.go run it).
func (k *collective) flat(c *Comm, a *Args) int {
	size := k.size(c, a)
	name := k.table(c.Size(), size, a.commutative())
	if i := k.find(name); i >= 0 && !k.algs[i].shm && k.algs[i].applies(c, a, size) {
		return i
	}
	// A table entry must apply; the first algorithm of every collective
	// applies to every call.
	return 0
}

// call runs a collective on the begun view c.
func (k *collective) call(c *Comm, a *Args, local func()) error {
	if err := c.Poll(); err != nil {
		return err
	}
	if c.Size() == 1 {
		if local != nil {
			local()
		}
		return nil
	}
	i := k.pick(c, a)
	k.count(i)
	al := &k.algs[i]
	rec := callRec{coll: k.id, alg: uint16(i), size: int64(k.size(c, a))}
	if k.varSize {
		rec.size = -1
	}
	if err := c.sh.record(c, rec); err != nil {
		return fmt.Errorf("%s (%s): %w", k.name, al.name, err)
	}
	if err := al.run(c, a); err != nil {
		if isAborted(err) {
			return err
		}
		return fmt.Errorf("%s (%s): %w", k.name, al.name, err)
	}
	return nil
}

// runFlat runs the table's flat choice (a level of a hierarchical
// algorithm).
func (k *collective) runFlat(c *Comm, a *Args, local func()) error {
	if c.Size() == 1 {
		if local != nil {
			local()
		}
		return nil
	}
	i := k.flat(c, a)
	k.count(i)
	return k.algs[i].run(c, a)
}

// SetAlgorithm forces algorithm alg for collective name in this process
// ("" restores the table), as GORUN_COLL_<NAME> does at start-up. Every
// rank must make the same choice before the calls it affects.
func SetAlgorithm(name, alg string) error {
	k := collectives[strings.ToLower(name)]
	if k == nil {
		return fmt.Errorf("coll: no collective %q", name)
	}
	k.load()
	if alg == "" {
		setForced(k.id, 0)
		return nil
	}
	i := k.find(strings.ToLower(alg))
	if i < 0 {
		return fmt.Errorf("coll: %s has no algorithm %q (known: %v)", name, alg, Algorithms(name))
	}
	setForced(k.id, int32(i+1))
	return nil
}

// Algorithms lists the algorithms of collective name.
func Algorithms(name string) []string {
	k := collectives[strings.ToLower(name)]
	if k == nil {
		return nil
	}
	var out []string
	for _, a := range k.algs {
		out = append(out, a.name)
	}
	return out
}

// Collectives lists the collectives by name, sorted.
func Collectives() []string {
	var out []string
	for n := range collectives {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
