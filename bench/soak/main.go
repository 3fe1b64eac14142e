// Soak sends many random-size messages between random ranks and checks
// that none is lost or corrupted and that memory stays flat:
//
//	gorun -np 8 ./bench/soak -n 1000000
//	GORUN_BTL=tcp,self gorun -np 8 ./bench/soak -n 1000000
//
// Every rank draws the same schedule from -seed: -n messages in batches of
// -batch per rank (batch*np messages), each with a random source and
// destination (a rank may send to itself), a size from 0 to -max bytes,
// log-uniform so that eager, rendezvous and single-copy (RMA) paths all
// carry their share, its number as its tag, and one of three
// pairings: Isend/Irecv, Isend/blocking Recv, blocking Send/Irecv; a
// third of the receives name AnySource. Within a batch a rank posts its
// Irecvs, starts its Isends, makes its blocking Sends (whose receives
// are posted Irecvs, so they cannot deadlock), makes its blocking Recvs
// (whose sends are Isends, started before anyone blocks) and waits for
// the rest, then the batch's buffers go back to a pool.
//
// Checks: each payload carries its message number in its first 8 bytes
// and a CRC-32C of the rest in its last 4 (from 12 bytes; smaller ones
// are a known pattern), checked on arrival with the status' source, tag
// and length. At the end every rank's per-peer counts and sums of payload
// CRCs, sent and received, are gathered and compared: a message lost,
// duplicated or misdelivered shows there even if no check fired. Any
// failure prints what and where, and the program exits 1. A rank whose
// batch makes no progress for -stall seconds prints its pending messages
// and aborts the job instead of hanging.
//
// Memory: VmRSS and VmHWM (/proc/self/status) and the Go heap (HeapAlloc,
// HeapSys, NumGC) of every rank after Init, at the middle and at the end,
// printed by rank 0.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorun/gorun/mpi"
)

var (
	nMsgs = flag.Int("n", 1000000, "messages in all, whatever the number of ranks")
	batch = flag.Int("batch", 64, "messages per rank in one batch (a batch has batch*np messages)")
	maxSz = flag.Int("max", 256<<10, "largest message in bytes (sizes are log-uniform in 1..max, and 1 in 32 is empty)")
	seed  = flag.Uint64("seed", 1, "seed of the schedule, the same on every rank")
	stall = flag.Int("stall", 120, "seconds a batch may make no progress before the job is aborted")
	spoil = flag.Int64("corrupt", -1, "flip a byte of this message on arrival, before the checks: shows that they catch it")
)

// Pairings of send and receive.
const (
	isendIrecv = iota
	isendRecv
	sendIrecv
)

var pairName = [...]string{"Isend/Irecv", "Isend/Recv", "Send/Irecv"}

// msg is one message of the schedule.
type msg struct {
	id       uint64
	src, dst int
	size     int
	tag      int
	pair     int
	any      bool // received with AnySource
}

// from is the source a receive of m names: m.src, or AnySource.
func (m *msg) from() int {
	if m.any {
		return mpi.AnySource
	}
	return m.src
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fill writes m's payload: its id, a stream of the id's PRNG, and the
// CRC-32C of what precedes it; it returns the CRC of the whole payload,
// which the end-of-run sums add up.
func fill(b []byte, id uint64) uint32 {
	if len(b) < 12 {
		for i := range b {
			b[i] = byte(id) + byte(i)*37
		}
		return crc32.Checksum(b, castagnoli)
	}
	binary.LittleEndian.PutUint64(b, id)
	x := id*0x9e3779b97f4a7c15 + 1
	body := b[8 : len(b)-4]
	i := 0
	for ; i+8 <= len(body); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(body[i:], x)
	}
	for ; i < len(body); i++ {
		body[i] = byte(x >> (8 * (i & 7)))
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return crc32.Checksum(b, castagnoli)
}

// check verifies a received payload of message m and returns its CRC.
func check(b []byte, m *msg) (uint32, error) {
	if len(b) < 12 {
		for i := range b {
			if b[i] != byte(m.id)+byte(i)*37 {
				return 0, fmt.Errorf("byte %d is %#x, want %#x", i, b[i], byte(m.id)+byte(i)*37)
			}
		}
		return crc32.Checksum(b, castagnoli), nil
	}
	if id := binary.LittleEndian.Uint64(b); id != m.id {
		return 0, fmt.Errorf("payload of message %d", id)
	}
	want := binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(b[:len(b)-4], castagnoli); got != want {
		return 0, fmt.Errorf("CRC-32C %08x, the payload says %08x", got, want)
	}
	return crc32.Checksum(b, castagnoli), nil
}

// schedule draws the next batch of k messages, numbered from first.
func schedule(r *rand.Rand, first uint64, k, np, max int) []msg {
	ms := make([]msg, k)
	logMax := math.Log2(float64(max))
	for i := range ms {
		m := &ms[i]
		m.id = first + uint64(i)
		m.src, m.dst = r.IntN(np), r.IntN(np)
		if r.IntN(32) != 0 {
			m.size = min(max, int(math.Exp2(r.Float64()*logMax)))
		}
		// Unique across batches: a rank may run batches ahead of another
		// (its sends eager, its receives done), and a tag of an earlier
		// batch would then match a receive of a later one there.
		m.tag = int(m.id % (mpi.TagUB + 1))
		m.pair = r.IntN(3)
		m.any = r.IntN(3) == 0
	}
	return ms
}

// pool keeps buffers by power-of-two capacity, so that batches reuse them
// and memory stays flat.
type pool [40][][]byte

func (p *pool) get(n int) []byte {
	c := bits.Len(uint(n))
	if l := len(p[c]); l > 0 {
		b := p[c][l-1]
		p[c] = p[c][:l-1]
		return b[:n]
	}
	return make([]byte, n, 1<<c)
}

func (p *pool) put(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	p[c] = append(p[c], b)
}

// mem is one rank's memory figures.
type mem struct {
	rss, hwm           int64 // kB
	heapAlloc, heapSys uint64
	numGC              uint32
}

func memNow() mem {
	var m mem
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "VmRSS:":
					m.rss = v
				case "VmHWM:":
					m.hwm = v
				}
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapAlloc, m.heapSys, m.numGC = ms.HeapAlloc, ms.HeapSys, ms.NumGC
	return m
}

func (m mem) vec() []int64 {
	return []int64{m.rss, m.hwm, int64(m.heapAlloc), int64(m.heapSys), int64(m.numGC)}
}

// tally is what one rank sent to or received from each peer.
type tally struct {
	n   []int64 // messages
	sum []int64 // sum of payload CRCs
	b   []int64 // bytes
}

func newTally(np int) tally {
	return tally{make([]int64, np), make([]int64, np), make([]int64, np)}
}

func (t tally) add(peer int, crc uint32, n int) {
	t.n[peer]++
	t.sum[peer] += int64(crc)
	t.b[peer] += int64(n)
}

func main() {
	flag.Parse()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	w := mpi.World()
	me, np := w.Rank(), w.Size()
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "soak: rank %d: FAILED: %s\n", me, fmt.Sprintf(format, a...))
		mpi.Abort(w, 1)
	}
	if *nMsgs < 0 || *batch < 1 || *maxSz < 1 {
		fail("bad flags: -n %d -batch %d -max %d", *nMsgs, *batch, *maxSz)
	}
	mems := []mem{memNow()}
	sent, recvd := newTally(np), newTally(np)
	var pl pool
	r := rand.New(rand.NewPCG(*seed, 0x50a4))
	per := *batch * np
	// progress counts completed operations, for the stall watchdog.
	var progress atomic.Int64
	var cur atomic.Pointer[[]msg]
	go watchdog(me, time.Duration(*stall)*time.Second, &progress, &cur, w)

	mpi.Barrier(w)
	t0 := time.Now()
	var bad int
	half := false
	for first := 0; first < *nMsgs; first += per {
		k := min(per, *nMsgs-first)
		ms := schedule(r, uint64(first), k, np, *maxSz)
		cur.Store(&ms)
		var reqs []*mpi.Request
		var rmsg []*msg   // the receive behind each request, nil for a send
		var rbuf [][]byte // its buffer
		var bufs [][]byte // every buffer of the batch, back to the pool at its end
		get := func(n int) []byte {
			b := pl.get(n)
			bufs = append(bufs, b)
			return b
		}
		// 1. Irecvs.
		for i := range ms {
			m := &ms[i]
			if m.dst != me || m.pair == isendRecv {
				continue
			}
			b := get(m.size)
			q, err := mpi.Irecv(w, b, m.from(), m.tag)
			if err != nil {
				fail("message %d: Irecv from %d: %v", m.id, m.src, err)
			}
			reqs, rmsg, rbuf = append(reqs, q), append(rmsg, m), append(rbuf, b)
		}
		// 2. Isends.
		for i := range ms {
			m := &ms[i]
			if m.src != me || m.pair == sendIrecv {
				continue
			}
			b := get(m.size)
			sent.add(m.dst, fill(b, m.id), m.size)
			q, err := mpi.Isend(w, b, m.dst, m.tag)
			if err != nil {
				fail("message %d: Isend to %d: %v", m.id, m.dst, err)
			}
			reqs, rmsg, rbuf = append(reqs, q), append(rmsg, nil), append(rbuf, nil)
		}
		// 3. Blocking Sends.
		for i := range ms {
			m := &ms[i]
			if m.src != me || m.pair != sendIrecv {
				continue
			}
			b := get(m.size)
			sent.add(m.dst, fill(b, m.id), m.size)
			if err := mpi.Send(w, b, m.dst, m.tag); err != nil {
				fail("message %d: Send to %d: %v", m.id, m.dst, err)
			}
			progress.Add(1)
		}
		// 4. Blocking Recvs.
		for i := range ms {
			m := &ms[i]
			if m.dst != me || m.pair != isendRecv {
				continue
			}
			b := get(m.size)
			st, err := mpi.Recv(w, b, m.from(), m.tag)
			if err != nil {
				fail("message %d: Recv from %d: %v", m.id, m.src, err)
			}
			bad += verify(me, m, st, b, recvd)
			progress.Add(1)
		}
		// 5. The rest.
		sts, err := mpi.Waitall(reqs)
		if err != nil {
			fail("batch from message %d: Waitall: %v", first, err)
		}
		for i, m := range rmsg {
			if m != nil {
				bad += verify(me, m, sts[i], rbuf[i], recvd)
			}
		}
		progress.Add(int64(len(reqs)))
		for _, b := range bufs {
			pl.put(b)
		}
		if !half && first+k >= *nMsgs/2 {
			half = true
			mems = append(mems, memNow())
		}
	}
	mpi.Barrier(w)
	el := time.Since(t0)
	cur.Store(nil)
	if !half {
		mems = append(mems, memNow())
	}
	mems = append(mems, memNow())

	// Counts and CRC sums: what each rank sent to each, against what each
	// received from each.
	mine := make([]int64, 0, 6*np+1)
	for _, t := range []tally{sent, recvd} {
		mine = append(append(append(mine, t.n...), t.sum...), t.b...)
	}
	mine = append(mine, int64(bad))
	all := make([]int64, len(mine)*np)
	if err := mpi.Allgather(w, mine, all); err != nil {
		fail("allgather of the tallies: %v", err)
	}
	memv := make([]int64, 0, 15)
	for _, m := range mems {
		memv = append(memv, m.vec()...)
	}
	memAll := make([]int64, len(memv)*np)
	if err := mpi.Gather(w, memv, memAll, 0); err != nil {
		fail("gather of the memory figures: %v", err)
	}
	if me != 0 {
		mpi.Finalize()
		return
	}
	ok := report(np, all, len(mine), memAll, len(memv), el)
	mpi.Finalize()
	if !ok {
		os.Exit(1)
	}
}

// verify checks one received message; it returns 1 for a bad one.
func verify(me int, m *msg, st mpi.Status, b []byte, recvd tally) int {
	var err error
	var crc uint32
	switch {
	case st.Source != m.src:
		err = fmt.Errorf("from rank %d", st.Source)
	case st.Tag != m.tag:
		err = fmt.Errorf("with tag %d", st.Tag)
	case st.Bytes() != m.size:
		err = fmt.Errorf("of %d bytes", st.Bytes())
	default:
		if int64(m.id) == *spoil && len(b) > 0 {
			b[len(b)/2] ^= 0x40
		}
		crc, err = check(b, m)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: rank %d: CORRUPT: message %d (%s, from rank %d, tag %d, %d bytes, any source %v) arrived %v\n",
			me, m.id, pairName[m.pair], m.src, m.tag, m.size, m.any, err)
		return 1
	}
	recvd.add(m.src, crc, m.size)
	return 0
}

// report prints the verdict and the memory table; it reports whether
// every message arrived intact.
func report(np int, all []int64, stride int, memAll []int64, mstride int, el time.Duration) bool {
	at := func(rank, table, field, peer int) int64 {
		return all[rank*stride+table*3*np+field*np+peer]
	}
	ok := true
	var msgs, byts, bad int64
	for s := range np {
		bad += all[s*stride+stride-1]
		for d := range np {
			for f, what := range []string{"messages", "CRC sum", "bytes"} {
				if tx, rx := at(s, 0, f, d), at(d, 1, f, s); tx != rx {
					fmt.Printf("soak: FAILED: rank %d sent rank %d %s %d, rank %d received %d\n", s, d, what, tx, d, rx)
					ok = false
				}
			}
			msgs += at(s, 0, 0, d)
			byts += at(s, 0, 2, d)
		}
	}
	if bad != 0 {
		fmt.Printf("soak: FAILED: %d messages arrived corrupt or misdelivered (stderr names them)\n", bad)
		ok = false
	}
	verdict := "OK: nothing lost, nothing corrupted"
	if !ok {
		verdict = "FAILED"
	}
	fmt.Printf("# soak np=%d n=%d batch=%d max=%d seed=%d GORUN_BTL=%q\n", np, *nMsgs, *batch, *maxSz, *seed, os.Getenv("GORUN_BTL"))
	fmt.Printf("%s: %d messages, %.2f GB, in %.1f s: %.0f msg/s, %.0f MB/s\n", verdict, msgs, float64(byts)/1e9,
		el.Seconds(), float64(msgs)/el.Seconds(), float64(byts)/el.Seconds()/1e6)
	fmt.Println("# rank  RSS MB start  mid   end  (peak)   Go heap MB start  mid   end   heap sys MB end  GCs")
	for r := range np {
		v := memAll[r*mstride : (r+1)*mstride]
		m := func(i, f int) int64 { return v[i*5+f] }
		fmt.Printf("%6d  %12.1f %5.1f %5.1f (%5.1f)  %16.1f %5.1f %5.1f  %15.1f  %4d\n", r,
			float64(m(0, 0))/1024, float64(m(1, 0))/1024, float64(m(2, 0))/1024, float64(m(2, 1))/1024,
			float64(m(0, 2))/1e6, float64(m(1, 2))/1e6, float64(m(2, 2))/1e6, float64(m(2, 3))/1e6, m(2, 4))
	}
	return ok
}

// watchdog aborts the job when the operations of a batch stop completing
// for d, after printing the batch's messages that involve this rank.
func watchdog(me int, d time.Duration, progress *atomic.Int64, cur *atomic.Pointer[[]msg], w *mpi.Comm) {
	last, since := progress.Load(), time.Now()
	for range time.Tick(time.Second) {
		if p := progress.Load(); p != last || cur.Load() == nil {
			last, since = p, time.Now()
			continue
		}
		if time.Since(since) < d {
			continue
		}
		fmt.Fprintf(os.Stderr, "soak: rank %d: FAILED: no operation completed for %v; this rank's messages in the batch:\n", me, d)
		if ms := cur.Load(); ms != nil {
			for _, m := range *ms {
				if m.src == me || m.dst == me {
					fmt.Fprintf(os.Stderr, "  message %d: %d -> %d, %s, tag %d, %d bytes, any source %v\n", m.id, m.src, m.dst, pairName[m.pair], m.tag, m.size, m.any)
				}
			}
		}
		mpi.Abort(w, 1)
	}
}
