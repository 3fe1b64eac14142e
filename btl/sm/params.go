package sm

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorun/gorun/internal/params"
)

// The ring's shape, as set by the user: kept as it is, never fitted.
const (
	envSlots = "GORUN_SM_SLOTS"
	envFrag  = "GORUN_SM_FRAG_SIZE"
)

var (
	pSlots = params.IntCheck(envSlots, defaultSlots,
		"shared-memory ring size in records of the largest size (a power of two, >= 2): the ring a sender gets in each local peer's segment holds this many times GORUN_SM_FRAG_SIZE (+64, rounded to 128) bytes; unset, the ring shrinks to fit a small /dev/shm",
		checkSlots)
	pFrag = params.IntCheck(envFrag, defaultFrag,
		"payload bytes of the largest shared-memory ring record (a multiple of 64): the fragment large frames are streamed in; small frames take whole 64-byte lines",
		checkFrag)
	pEager = params.IntCheck("GORUN_SM_EAGER_LIMIT", defaultEager,
		"largest message sent eagerly over shared memory; larger ones go by rendezvous",
		func(n int) error {
			if n < 0 {
				return errors.New("want 0 or more bytes")
			}
			return nil
		})
	pBellAfter = params.Int("GORUN_SM_DOORBELL_AFTER", defaultBellAfter,
		"a receiver with more registered shared-memory senders than this polls by doorbell (only the rings that rang) instead of every ring; 0 always")
	pSingleCopy = params.String("GORUN_SM_SINGLE_COPY", "cma",
		`single copy between local ranks for rendezvous: "cma" (process_vm_readv/writev; under Yama's ptrace_scope 1 each rank then lets any process of its user attach to it, PR_SET_PTRACER_ANY, as ptrace_scope 0 lets any) or "none" (always the ring)`)
)

// The ring's shape: 16 records of 64 KiB (1 MiB) was the best of the
// shapes probed on this machine when a ring was fixed slots
// (docs/measurements.md, "ring fragments of 64 KB x 16 slots"): smaller
// fragments pay a hand-off (one cache-line miss each way) more often,
// larger rings fall out of the 2 MiB L2 through which sender and receiver
// pass the data. A record carries up to 65600 bytes (the stride is
// rounded to 128), so that a 64 KiB frame is one record.
const (
	defaultSlots = 16
	defaultFrag  = 64 << 10
)

// fitSteps is how a ring shrinks when /dev/shm is short (fitRing), each
// step halving one of its dimensions down to its floor before the next
// step: the fragment down to 16 KiB (the eager limit: every eager message
// stays one record), the slots down to 4, the fragment down to 4 KiB, the
// slots down to 2, the fragment down to 1 KiB. The rings then take from
// 1032 KiB (the default) down to 8 KiB, their control page included (with
// 4 KiB pages): a ring of 8 KiB still carries messages of up to 64 B at
// the speed of a large one, and rendezvous moves those above the eager
// limit by single copy, not through it; streams of eager messages lose
// (docs/measurements.md, "Rings that fit /dev/shm").
var fitSteps = [...]struct{ slots, frag int }{{0, 16 << 10}, {4, 0}, {0, 4 << 10}, {2, 0}, {0, 1 << 10}}

// ringShare is the share of /dev/shm's free space that the rings of a
// host's ranks may take together, were every pair to talk: the rest is
// left to the collectives' segments (coll takes at most an eighth of what
// it finds), shared windows and other jobs.
const ringShare = 2 // a half

// defaultEager is the eager limit, measured (doc.go, "Eager limit").
const defaultEager = 16 << 10

// livenessEvery is how often a stalled transfer checks that its peer still
// lives (a pidfd poll, ~1 µs): 10 ms costs nothing measurable and finds a
// dead peer 50 times sooner than the membership's failure detector
// (~0.5 s, docs/measurements.md).
const livenessEvery = 10 * time.Millisecond

// defaultBellAfter: a receiver polls every inbound ring while it has at
// most this many senders, and switches to the doorbell beyond (doc.go,
// "Doorbell"). With one or few senders, polling their rings costs a load
// or a few of lines in cache, while the doorbell adds a cache line that
// both sides write on every message to the latency path.
const defaultBellAfter = 4

// stallEvery: a stalled transfer reads the clock on every stallEvery-th
// poll without progress (and on the first after a Wait), not on each.
const stallEvery = 64

// maxSlots and maxFragSize bound a ring's shape, ours (the tunables) and
// a peer's (attach): a ring of at most 2^16 slots of 1 GiB stays far from
// overflowing int.
const (
	maxSlots    = 1 << 16
	maxFragSize = 1 << 30
)

// maxFrame rejects first fragments claiming absurd lengths (corrupt memory).
const maxFrame = 1 << 42

// pollBudget bounds the bytes one ring delivers per Progress call, in
// units of its size, so a stream from one peer cannot starve the others.
const pollBudget = 2

// fitRing returns the ring shape (slots, frag) shrunk by fitSteps until
// a ring takes at most budget bytes, or to the least shape, or to where a
// smaller shape would take no fewer bytes (a ring is whole pages: with 64
// KiB pages nothing below 4 records of 8 KiB is smaller).
func fitRing(slots, frag, budget int) (int, int) {
	for _, st := range fitSteps {
		for ringBytes(slots, frag) > budget {
			s, f := slots, frag
			if st.frag > 0 && frag > st.frag {
				f = max(frag/2/lineSize*lineSize, st.frag)
			} else if st.slots > 0 && slots > st.slots {
				s = slots / 2
			} else {
				break
			}
			if ringBytes(s, f) >= ringBytes(slots, frag) {
				return slots, frag
			}
			slots, frag = s, f
		}
	}
	return slots, frag
}

// checkSlots and checkFrag are the ring shape's bounds, for the tunables
// (a value outside them is ignored with a warning) and for a peer's ring
// as attach finds it.
func checkSlots(n int) error {
	if n < 2 || n&(n-1) != 0 || n > maxSlots {
		return fmt.Errorf("want a power of two in [2, %d]", maxSlots)
	}
	return nil
}

func checkFrag(n int) error {
	if n < lineSize || n%lineSize != 0 || n > maxFragSize {
		return fmt.Errorf("want a multiple of %d up to 1 GiB", lineSize)
	}
	return nil
}
