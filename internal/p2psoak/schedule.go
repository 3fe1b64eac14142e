// Package p2psoak runs a random schedule of point-to-point messages and
// checks every one of them: the differential soak of the point-to-point
// layer, as internal/collsoak is of the collectives (bench/p2psoak runs
// it for long; tests/p2psoak_test.go briefly on every change).
//
// Every rank draws the same schedule from the seed, a round at a time. A
// round is a list of messages, each on one of three communicators (the
// world, a Dup of it, the world's ranks in reverse order), from any rank
// to any rank (itself too), with one of four tags, so that a pair carries
// several streams at once, of a size drawn log-uniform up to Config.Max
// or, half of the time, at the transports' limits (btl/sm's short and
// one-line records, its eager limit, tcp's, a fragment), sent by Isend,
// Issend, Send, Ssend, Ibsend (at most four a rank between fenced rounds)
// or a persistent request (SendInit, Start: kept from round to round and
// started again for the next message of its communicator, peer, tag and
// length, as receives posted by RecvInit are), from device memory too
// with Config.GPU. Each rank receives what comes to it
// on a communicator in one way, drawn for the round: receives posted for
// each message (some of them persistent, into device memory too with
// Config.GPU), receives from the right source with AnyTag, Mprobe then
// Mrecv, or Probe then Recv; in a fenced round (one in three, which
// ends with a Barrier so that no later round's message can arrive
// meanwhile) also AnySource receives of the right tag, AnySource and
// AnyTag receives, the first messages of each stream by their own
// receives and the rest by AnySource/AnyTag ones, or Improbe of any
// source and tag and Mrecv. A receive's buffer is a little larger than
// its message now and then: the bytes past the message must keep their
// sentinel. Every message's bytes are a function of its round and
// index, so the receiver knows what each must hold; a wildcard receive's
// status names the message it got, which must be the next one of its
// source's (or source's and tag's) stream: that checks MPI's
// non-overtaking order too. A send buffer must be unchanged when its send
// completes, a cancelled receive must say so, an Issend must not complete
// before its receive is posted, and now and then a rank sleeps before a
// round, so that the others' messages wait for it unexpected.
package p2psoak

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gorun/gorun/internal/soak"
)

// Config is a soak's schedule.
type Config struct {
	Rounds int    // rounds of messages
	Seed   uint64 // the schedule's seed: the same at every rank
	Max    int    // largest message in bytes
	Slow   int    // one round in Slow starts with one rank asleep for up to 2 ms; 0: never
	// GPU: a third of the messages are sent from device memory, and a
	// third of those received by posted receives land in it (world rank r
	// on GPU r mod the GPUs there are).
	GPU bool
	// Stall: a round that has not ended at this rank after so long
	// prints what the rank sends and receives in it and aborts the job
	// (a message lost would leave its receiver waiting forever); 0: never.
	Stall time.Duration
}

// edges are message sizes in bytes where the transports change: btl/sm's
// short record (24 bytes of header and payload: 11 of payload behind
// p2p's eager header, 13 significant bytes for a length of 1-255), its
// one-line record (34 bytes of payload), its eager limit (16 KiB), tcp's
// (64 KiB) and btl/sm's fragment (64 KiB).
var edges = []int{0, 1, 7, 8, 11, 12, 33, 34, 35, 64, 4095, 4096, 16<<10 - 1, 16 << 10, 16<<10 + 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 128 << 10}

// Ways to send, and to receive what comes to a rank on a communicator.
const (
	sIsend = iota
	sIssend
	sSend
	sSsend
	sIbsend
	sPersistent
	nSend
)

var sendNames = [nSend]string{"isend", "issend", "send", "ssend", "ibsend", "persistent"}

const (
	rSpecific = iota // a receive per message, source and tag
	rAnyTag          // a receive per message, its source, AnyTag
	rMprobe          // Mprobe(source, AnyTag), then Mrecv
	rProbe           // Probe(source, AnyTag), then Recv(source, the tag)
	// Fenced rounds only: the receives take messages of any source.
	rAnySource // a receive per message, AnySource, its tag
	rAnyAny    // a receive per message, AnySource, AnyTag
	rMixed     // each stream's first messages rSpecific, the rest rAnyAny
	rImprobe   // Improbe(AnySource, AnyTag) until all came, then Mrecv
	nRecv
	nRecvUnfenced = rAnySource
)

var recvNames = [nRecv]string{"specific", "anytag", "mprobe", "probe", "anysource", "anyany", "mixed", "improbe"}

// probing reports whether mode receives by probes (nothing is posted
// ahead: a blocking send to such a rank could wait for one that waits for
// it).
func probing(mode int) bool { return mode == rMprobe || mode == rProbe || mode == rImprobe }

// bsendMax is the largest buffered send, bsendPer the most a rank makes
// between two fenced rounds: the attached buffer holds that many. (A
// buffered send's space comes back once its data is delivered, which a
// receiver that fell behind can hold off for rounds; after a fenced
// round's Barrier every message before it has been received.)
const (
	bsendMax = 4096
	bsendPer = 4
)

// maxTag: tags are 0..maxTag-1; cancelTag is never sent; checkSync's
// messages have tags of their own.
const (
	maxTag    = 4
	cancelTag = 1000
	syncTag   = 1001
	goTag     = 1002
)

// msg is one message of a round.
type msg struct {
	idx      int // index in the round
	comm     int // 0: the world, 1: its Dup, 2: the world reversed
	src, dst int // ranks in comm
	tag      int
	bytes    int
	send     int  // sIsend...
	sdev     bool // sent from device memory
	rdev     bool // received into device memory (posted receives only)
	slack    int  // receive buffer bytes beyond the message
	first    bool // rMixed: received by a receive of its own
}

func (m *msg) String() string {
	s := fmt.Sprintf("message %d: %d bytes from rank %d to rank %d of communicator %d, tag %d, by %s", m.idx, m.bytes, m.src, m.dst, m.comm, m.tag, sendNames[m.send])
	if m.sdev {
		s += " from device memory"
	}
	if m.rdev {
		s += " into device memory"
	}
	return s
}

// round is one drawn round.
type round struct {
	r       int
	fenced  bool
	msgs    []msg
	modes   [3][]int // receive mode by communicator and destination rank
	sleeper int      // world rank that sleeps first; -1: none
	nap     time.Duration
	cancel  bool // every rank posts a receive and cancels it
	// A fenced round's check of Issend after its Barrier (run.go,
	// checkSync): world rank syncFrom's Issend to syncTo must not
	// complete before syncTo posts its receive; syncFrom == syncTo: none.
	syncFrom, syncTo int
}

// draw returns round r of the schedule for n ranks; every rank draws the
// same. bsends counts each world rank's buffered sends since the last
// fenced round, across calls.
func draw(rng *rand.Rand, r, n int, cfg Config, bsends []int) round {
	rd := round{r: r, fenced: rng.IntN(3) == 0, sleeper: -1, cancel: rng.IntN(4) == 0}
	modes := nRecvUnfenced
	if rd.fenced {
		modes = nRecv
	}
	for c := range rd.modes {
		rd.modes[c] = make([]int, n)
		for d := range rd.modes[c] {
			rd.modes[c][d] = rng.IntN(modes)
		}
	}
	if rd.fenced && n > 1 && rng.IntN(2) == 0 {
		rd.syncFrom = rng.IntN(n)
		rd.syncTo = (rd.syncFrom + 1 + rng.IntN(n-1)) % n
	}
	if cfg.Slow > 0 && rng.IntN(cfg.Slow) == 0 {
		rd.sleeper = rng.IntN(n)
		rd.nap = time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	rd.msgs = make([]msg, rng.IntN(3*n+1))
	for i := range rd.msgs {
		m := msg{idx: i, comm: rng.IntN(3), src: rng.IntN(n), dst: rng.IntN(n), tag: rng.IntN(maxTag), send: rng.IntN(nSend)}
		if rng.IntN(2) == 0 {
			m.bytes = edges[rng.IntN(len(edges))]
		} else {
			m.bytes = int(float64(cfg.Max) * rng.Float64() * rng.Float64() * rng.Float64())
		}
		if m.send == sPersistent {
			// The sizes persistent sends keep requests for (run.go).
			m.bytes = edges[rng.IntN(len(edges))]
		}
		m.bytes = min(m.bytes, cfg.Max)
		if rng.IntN(3) == 0 {
			m.slack = rng.IntN(100)
		}
		mode := rd.modes[m.comm][m.dst]
		if (m.send == sSend || m.send == sSsend) && probing(mode) {
			m.send = sIsend
		}
		// The world's rank of the sender, for the buffered sends' count.
		w := m.src
		if m.comm == 2 {
			w = n - 1 - m.src
		}
		if m.send == sIbsend && (m.bytes > bsendMax || bsends[w] == bsendPer) {
			m.send = sIsend
		}
		if m.send == sIbsend {
			bsends[w]++
		}
		if cfg.GPU && (m.send == sIsend || m.send == sSend) && rng.IntN(3) == 0 {
			m.sdev = true
		}
		if cfg.GPU && (mode == rSpecific || mode == rAnyTag) && rng.IntN(3) == 0 {
			m.rdev = true
		}
		m.first = mode == rMixed && rng.IntN(2) == 0
		rd.msgs[i] = m
	}
	if rd.fenced {
		clear(bsends)
	}
	// rMixed: a stream's messages with receives of their own are its
	// first ones (a specific receive takes the first message of its
	// stream still unmatched).
	type stream struct{ comm, src, dst, tag int }
	rest := map[stream]bool{}
	for i := range rd.msgs {
		m := &rd.msgs[i]
		k := stream{m.comm, m.src, m.dst, m.tag}
		if rest[k] {
			m.first = false
		}
		if !m.first {
			rest[k] = true
		}
	}
	return rd
}

// pattern fills b with message idx of round r's bytes: words of a
// 64-bit mix of round, message and word index.
func pattern(b []byte, r, idx int) {
	for i := 0; i < len(b); i += 8 {
		x := soak.Mix(uint64(r)<<32 ^ uint64(idx)<<20 ^ uint64(i/8))
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

// sentinel is what a receive buffer holds past its message.
const sentinel = 0xa5
