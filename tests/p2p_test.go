package tests

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() {
	rankCases["wildcards"] = caseWildcards
	rankCases["order"] = caseOrder
	rankCases["truncate"] = caseTruncate
	rankCases["sizes"] = caseSizes
	rankCases["outstanding"] = caseOutstanding
	rankCases["probe"] = caseProbe
	rankCases["ringsum"] = caseRingSum
	rankCases["types"] = caseTypes
	rankCases["ssend"] = caseSsend
	rankCases["errors"] = caseErrors
	rankCases["objects"] = caseObjects
	rankCases["waitany"] = caseWaitany
}

// pattern fills b with bytes that depend on seed and position.
func pattern(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// caseWildcards: every other rank sends rank*10+k with tag k (k = 0..2);
// rank 0 receives them all with wildcards and checks each status. The
// order of the receives makes every one of them matchable whatever the
// arrival order: first the tag-1 messages with AnySource (one per
// sender), then from each sender with AnyTag (its tag-0 message: a
// source's messages match in the order sent), then the tag-2 ones with
// both wildcards. (An earlier version mixed AnyTag receives with tag-1
// receives; an AnyTag receive could take a tag-1 message that a later
// tag-1 receive then waited for forever: a rare hang under load.)
func caseWildcards(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if me != 0 {
		for k := 0; k < 3; k++ {
			if err := mpi.Send(w, []int32{int32(me*10 + k)}, 0, k); err != nil {
				return err
			}
		}
		return nil
	}
	type want struct{ src, tag, wantTag int }
	var plan []want
	for range n - 1 {
		plan = append(plan, want{mpi.AnySource, 1, 1})
	}
	for s := 1; s < n; s++ {
		plan = append(plan, want{s, mpi.AnyTag, 0})
	}
	for range n - 1 {
		plan = append(plan, want{mpi.AnySource, mpi.AnyTag, 2})
	}
	seen := map[[2]int]bool{}
	buf := make([]int32, 1)
	for _, p := range plan {
		st, err := mpi.Recv(w, buf, p.src, p.tag)
		if err != nil {
			return err
		}
		if int(buf[0]) != st.Source*10+st.Tag || st.Count() != 1 {
			return fmt.Errorf("got %d from %d tag %d count %d", buf[0], st.Source, st.Tag, st.Count())
		}
		if st.Tag != p.wantTag || (p.src != mpi.AnySource && st.Source != p.src) {
			return fmt.Errorf("receive (source %d, tag %d) matched source %d tag %d, want tag %d", p.src, p.tag, st.Source, st.Tag, p.wantTag)
		}
		k := [2]int{st.Source, st.Tag}
		if seen[k] {
			return fmt.Errorf("message from %d tag %d received twice", st.Source, st.Tag)
		}
		seen[k] = true
	}
	return nil
}

// caseOrder: ranks 1..n-1 each send 10,000 messages of varying sizes
// (eager and rendezvous) to rank 0, which receives with AnySource and
// checks that each sender's sequence arrives in order (non-overtaking).
func caseOrder(w *mpi.Comm) error {
	const count = 10000
	me, n := w.Rank(), w.Size()
	size := func(i int) int {
		switch {
		case i%1000 == 999:
			return 200 << 10 // rendezvous
		case i%7 == 0:
			return 0
		default:
			return 1 + i%300
		}
	}
	if me != 0 {
		buf := make([]byte, 200<<10)
		for i := 0; i < count; i++ {
			b := buf[:size(i)]
			if len(b) >= 4 {
				b[0], b[1], b[2], b[3] = byte(i), byte(i>>8), byte(i>>16), byte(me)
			}
			tag := i % 5 // several tags, one sender: order still holds per tag set
			if err := mpi.Send(w, b, 0, tag); err != nil {
				return err
			}
		}
		return nil
	}
	next := make([]int, n)
	buf := make([]byte, 200<<10)
	for k := 0; k < count*(n-1); k++ {
		st, err := mpi.Recv(w, buf, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		s := st.Source
		i := next[s]
		if st.Bytes() != size(i) || st.Tag != i%5 {
			return fmt.Errorf("from rank %d: message %d has %d bytes tag %d, expected %d bytes tag %d", s, i, st.Bytes(), st.Tag, size(i), i%5)
		}
		if st.Bytes() >= 4 {
			got := int(buf[0]) | int(buf[1])<<8 | int(buf[2])<<16
			if got != i&0xffffff || int(buf[3]) != s {
				return fmt.Errorf("from rank %d: expected message %d, got %d", s, i, got)
			}
		}
		next[s]++
	}
	return nil
}

// caseTruncate: a receive too small fails with ErrTruncate for eager and
// rendezvous messages, keeps the first bytes, and the job goes on.
func caseTruncate(w *mpi.Comm) error {
	me := w.Rank()
	for _, size := range []int{100, 1 << 20} {
		src := make([]byte, size)
		pattern(src, size)
		if me == 1 {
			if err := mpi.Send(w, src, 0, 5); err != nil {
				return err
			}
			if err := mpi.Send(w, []byte("after"), 0, 6); err != nil {
				return err
			}
		}
		if me == 0 {
			small := make([]byte, 10)
			st, err := mpi.Recv(w, small, 1, 5)
			if !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("size %d: want ErrTruncate, got %v", size, err)
			}
			if string(small) != string(src[:10]) || st.Source != 1 || st.Tag != 5 {
				return fmt.Errorf("size %d: truncated data or status wrong: %v %+v", size, small, st)
			}
			after := make([]byte, 5)
			if _, err := mpi.Recv(w, after, 1, 6); err != nil || string(after) != "after" {
				return fmt.Errorf("size %d: the job did not go on after truncation: %q %v", size, after, err)
			}
		}
	}
	return nil
}

// caseSizes: messages of 0 B up to 256 MiB between ranks 0 and 1, both
// directions, checked by CRC.
func caseSizes(w *mpi.Comm) error {
	me := w.Rank()
	if me > 1 {
		return nil
	}
	peer := 1 - me
	for _, size := range []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 256 << 20} {
		send := make([]byte, size)
		pattern(send, size+me)
		recv := make([]byte, size)
		st, err := mpi.Sendrecv(w, send, peer, 1, recv, peer, 1)
		if err != nil {
			return fmt.Errorf("size %d: %w", size, err)
		}
		want := make([]byte, size)
		pattern(want, size+peer)
		if st.Bytes() != size || crc32.ChecksumIEEE(recv) != crc32.ChecksumIEEE(want) {
			return fmt.Errorf("size %d: received %d bytes, content mismatch", size, st.Bytes())
		}
	}
	return nil
}

// caseOutstanding: hundreds of Isend/Irecv in flight between every pair,
// mixed sizes, completed with one Waitall.
func caseOutstanding(w *mpi.Comm) error {
	const per = 300
	me, n := w.Rank(), w.Size()
	var reqs []*mpi.Request
	recvs := map[[2]int][]int64{}
	for p := 0; p < n; p++ {
		if p == me {
			continue
		}
		for k := 0; k < per; k++ {
			sz := 1 + (k*37)%2000
			if k%100 == 0 {
				sz = 20000 // 160 KB: rendezvous
			}
			rb := make([]int64, sz)
			recvs[[2]int{p, k}] = rb
			q, err := mpi.Irecv(w, rb, p, k)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
			sb := make([]int64, sz)
			for i := range sb {
				sb[i] = int64(me*1000000 + k*1000 + i%1000)
			}
			q, err = mpi.Isend(w, sb, p, k)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	for key, rb := range recvs {
		p, k := key[0], key[1]
		for i, v := range rb {
			if v != int64(p*1000000+k*1000+i%1000) {
				return fmt.Errorf("from %d tag %d element %d = %d", p, k, i, v)
			}
		}
	}
	return nil
}

// caseProbe: Probe reports the size, then Recv of exactly that size works.
func caseProbe(w *mpi.Comm) error {
	me := w.Rank()
	sizes := []int{0, 3, 10000, 300000}
	if me == 1 {
		for i, s := range sizes {
			b := make([]float64, s)
			for j := range b {
				b[j] = float64(j + i)
			}
			if err := mpi.Send(w, b, 0, 40+i); err != nil {
				return err
			}
		}
	}
	if me == 0 {
		for range sizes {
			st, err := mpi.Probe(w, 1, mpi.AnyTag)
			if err != nil {
				return err
			}
			i := st.Tag - 40
			if mpi.GetCount[float64](st) != sizes[i] {
				return fmt.Errorf("probe tag %d: count %d, want %d", st.Tag, mpi.GetCount[float64](st), sizes[i])
			}
			b := make([]float64, mpi.GetCount[float64](st))
			st2, err := mpi.Recv(w, b, st.Source, st.Tag)
			if err != nil || st2.Count() != sizes[i] {
				return fmt.Errorf("recv after probe: %v count %d", err, st2.Count())
			}
			for j := range b {
				if b[j] != float64(j+i) {
					return fmt.Errorf("tag %d element %d = %v", st.Tag, j, b[j])
				}
			}
		}
		if ok, _, err := mpi.Iprobe(w, 1, mpi.AnyTag); ok || err != nil {
			return fmt.Errorf("Iprobe after all received: %v %v", ok, err)
		}
	}
	return nil
}

// caseRingSum: each rank passes its rank around the ring and sums what
// passes by; then Allreduce and Bcast agree with the formula.
func caseRingSum(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	val := []int64{int64(me)}
	sum := int64(me)
	for s := 1; s < n; s++ {
		in := []int64{0}
		if _, err := mpi.Sendrecv(w, val, (me+1)%n, 0, in, (me-1+n)%n, 0); err != nil {
			return err
		}
		val = in
		sum += in[0]
	}
	want := int64(n * (n - 1) / 2)
	if sum != want {
		return fmt.Errorf("ring sum %d, want %d", sum, want)
	}
	all := []int64{int64(me)}
	if err := mpi.Allreduce(w, all, all, mpi.Sum); err != nil {
		return err
	}
	b := []int64{0}
	if me == n-1 {
		b[0] = 42
	}
	if err := mpi.Bcast(w, b, n-1); err != nil {
		return err
	}
	if all[0] != want || b[0] != 42 {
		return fmt.Errorf("allreduce %d (want %d), bcast %d", all[0], want, b[0])
	}
	return mpi.Barrier(w)
}

func sendRecvTyped[T mpi.Numeric](w *mpi.Comm, mk func(int) T) error {
	if w.Rank() > 1 {
		return nil
	}
	peer := 1 - w.Rank()
	s := make([]T, 1001)
	for i := range s {
		s[i] = mk(i + w.Rank())
	}
	r := make([]T, 1001)
	st, err := mpi.Sendrecv(w, s, peer, 0, r, peer, 0)
	if err != nil {
		return err
	}
	if st.Count() != len(r) {
		return fmt.Errorf("%T: count %d", s, st.Count())
	}
	for i := range r {
		if r[i] != mk(i+peer) {
			return fmt.Errorf("%T: element %d = %v", r, i, r[i])
		}
	}
	return nil
}

// caseTypes: point-to-point on every numeric element type.
func caseTypes(w *mpi.Comm) error {
	errs := []error{
		sendRecvTyped(w, func(i int) int { return i * -3 }),
		sendRecvTyped(w, func(i int) int8 { return int8(i) }),
		sendRecvTyped(w, func(i int) int16 { return int16(i * 7) }),
		sendRecvTyped(w, func(i int) int32 { return int32(i * 11) }),
		sendRecvTyped(w, func(i int) int64 { return int64(i) << 40 }),
		sendRecvTyped(w, func(i int) uint { return uint(i) * 5 }),
		sendRecvTyped(w, func(i int) uint8 { return uint8(i) }),
		sendRecvTyped(w, func(i int) uint16 { return uint16(i) }),
		sendRecvTyped(w, func(i int) uint32 { return uint32(i) << 20 }),
		sendRecvTyped(w, func(i int) uint64 { return uint64(i) << 50 }),
		sendRecvTyped(w, func(i int) uintptr { return uintptr(i) }),
		sendRecvTyped(w, func(i int) float32 { return float32(i) / 3 }),
		sendRecvTyped(w, func(i int) float64 { return float64(i) / 7 }),
		sendRecvTyped(w, func(i int) complex64 { return complex(float32(i), -1) }),
		sendRecvTyped(w, func(i int) complex128 { return complex(float64(i), 0.5) }),
	}
	return errors.Join(errs...)
}

// caseSsend: Ssend completes only after the receive matched; a small Ssend
// to a rank that posts late still completes.
func caseSsend(w *mpi.Comm) error {
	if w.Rank() == 0 {
		if err := mpi.Ssend(w, []int32{7}, 1, 3); err != nil {
			return err
		}
		// The receiver sends after its Recv: if Ssend returned before the
		// match this still holds, so also check Issend's Test before.
		q, err := mpi.Issend(w, []int32{8}, 1, 4)
		if err != nil {
			return err
		}
		if done, _, _ := q.Test(); done {
			return fmt.Errorf("Issend completed before rank 1 posted its receive")
		}
		mpi.Send(w, []int32{0}, 1, 5) // tell rank 1 to receive now
		_, err = q.Wait()
		return err
	}
	if w.Rank() == 1 {
		b := []int32{0}
		if _, err := mpi.Recv(w, b, 0, 3); err != nil || b[0] != 7 {
			return fmt.Errorf("ssend recv %v %v", b, err)
		}
		if _, err := mpi.Recv(w, b, 0, 5); err != nil {
			return err
		}
		if _, err := mpi.Recv(w, b, 0, 4); err != nil || b[0] != 8 {
			return fmt.Errorf("issend recv %v %v", b, err)
		}
	}
	return nil
}

// caseErrors: invalid rank, tag, root and op give errors of the right
// class, and nothing is sent.
func caseErrors(w *mpi.Comm) error {
	n := w.Size()
	checks := []struct {
		err  error
		want mpi.Class
	}{
		{mpi.Send(w, []int{1}, n, 0), mpi.ErrRank},
		{mpi.Send(w, []int{1}, -1, 0), mpi.ErrRank},
		{mpi.Send(w, []int{1}, 0, -5), mpi.ErrTag},
		{mpi.Send(w, []int{1}, mpi.AnySource, 0), mpi.ErrRank},
		{func() error { _, err := mpi.Recv(w, []int{1}, n+3, 0); return err }(), mpi.ErrRank},
		{func() error { _, err := mpi.Recv(w, []int{1}, 0, -7); return err }(), mpi.ErrTag},
		{mpi.Bcast(w, []int{1}, n), mpi.ErrRoot},
		{mpi.Allreduce(w, []float64{1}, []float64{0}, mpi.Band), mpi.ErrOp},
		{mpi.Allreduce(w, []float64{1, 2}, []float64{0}, mpi.Sum), mpi.ErrCount},
	}
	for i, c := range checks {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("check %d: want %v, got %v", i, c.want, c.err)
		}
	}
	return mpi.Barrier(w)
}

type record struct {
	Name  string
	Vals  []float64
	Inner map[string]int
}

// caseObjects: the msgpack object API point-to-point and by broadcast.
func caseObjects(w *mpi.Comm) error {
	if w.Rank() == 0 {
		for p := 1; p < w.Size(); p++ {
			if err := mpi.SendObj(w, record{Name: fmt.Sprint("to ", p), Vals: []float64{1.5, float64(p)}, Inner: map[string]int{"p": p}}, p, 9); err != nil {
				return err
			}
		}
	} else {
		var r record
		if _, err := mpi.RecvObj(w, &r, 0, 9); err != nil {
			return err
		}
		if r.Name != fmt.Sprint("to ", w.Rank()) || r.Vals[1] != float64(w.Rank()) || r.Inner["p"] != w.Rank() {
			return fmt.Errorf("object %+v", r)
		}
	}
	var m map[string][]string
	if w.Rank() == 0 {
		m = map[string][]string{"a": {"x", "y"}}
	}
	if err := mpi.BcastObj(w, &m, 0); err != nil {
		return err
	}
	if len(m["a"]) != 2 || m["a"][1] != "y" {
		return fmt.Errorf("bcast object %v", m)
	}
	// A root value that cannot be encoded fails the call at every rank
	// with ErrArg, the others told that the root's value was at fault
	// (they failed with a mismatched count), and the next call works.
	var ch any
	if w.Rank() == 0 {
		ch = make(chan int)
	}
	err := mpi.BcastObj(w, &ch, 0)
	want := "root 0's value could not be encoded"
	if w.Rank() == 0 {
		want = "encode"
	}
	if !errors.Is(err, mpi.ErrArg) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("BcastObj of a channel: %v, want ErrArg saying %q", err, want)
	}
	if err := mpi.BcastObj(w, &m, 0); err != nil || len(m["a"]) != 2 {
		return fmt.Errorf("BcastObj after a failed one: %v, %v", m, err)
	}
	return nil
}

// caseWaitany: rank 0 waits for any of receives from every other rank,
// each of which sends once; Waitany returns each exactly once.
func caseWaitany(w *mpi.Comm) error {
	n := w.Size()
	if w.Rank() != 0 {
		return mpi.Send(w, []int{w.Rank()}, 0, 2)
	}
	reqs := make([]*mpi.Request, n-1)
	bufs := make([][]int, n-1)
	for i := range reqs {
		bufs[i] = []int{-1}
		var err error
		if reqs[i], err = mpi.Irecv(w, bufs[i], i+1, 2); err != nil {
			return err
		}
	}
	for k := 0; k < n-1; k++ {
		i, st, err := mpi.Waitany(reqs)
		if err != nil || i < 0 || bufs[i][0] != i+1 || st.Source != i+1 {
			return fmt.Errorf("Waitany: %d %v %v", i, st, err)
		}
	}
	if i, _, _ := mpi.Waitany(reqs); i != -1 {
		return fmt.Errorf("Waitany on all-nil requests returned %d", i)
	}
	ok, _, err := mpi.Testall(reqs)
	if !ok || err != nil {
		return fmt.Errorf("Testall on nil requests: %v %v", ok, err)
	}
	return nil
}

func TestWildcards(t *testing.T) { job{np: 4, cas: "wildcards"}.ok(t) }
func TestOrdering(t *testing.T)  { job{np: 3, cas: "order"}.ok(t) }
func TestTruncate(t *testing.T)  { job{np: 2, cas: "truncate"}.ok(t) }
func TestSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB messages: skipped in -short")
	}
	job{np: 2, cas: "sizes"}.ok(t)
}
func TestOutstanding(t *testing.T) { job{np: 3, cas: "outstanding"}.ok(t) }
func TestProbe(t *testing.T)       { job{np: 2, cas: "probe"}.ok(t) }
func TestTypes(t *testing.T)       { job{np: 2, cas: "types"}.ok(t) }
func TestSsend(t *testing.T)       { job{np: 2, cas: "ssend"}.ok(t) }
func TestErrors(t *testing.T)      { job{np: 3, cas: "errors"}.ok(t) }
func TestObjects(t *testing.T)     { job{np: 3, cas: "objects"}.ok(t) }
func TestWaitany(t *testing.T)     { job{np: 4, cas: "waitany"}.ok(t) }

// TestSizesNP runs a ring, Allreduce and Bcast for np = 1..8 on this small
// machine (np above the core count oversubscribes).
func TestSizesNP(t *testing.T) {
	for np := 1; np <= 8; np++ {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "ringsum"}.ok(t) })
	}
}

// TestSelfMessages: every case above also works through the self transport
// when ranks message themselves, and the tcp transport alone.
func TestTCPOnly(t *testing.T) {
	job{np: 3, cas: "outstanding", env: []string{"GORUN_BTL=tcp,self"}}.ok(t)
}

func init() {
	rankCases["procnull"] = func(w *mpi.Comm) error {
		if err := mpi.Send(w, []int{1}, mpi.ProcNull, 0); err != nil {
			return err
		}
		st, err := mpi.Recv(w, make([]int, 3), mpi.ProcNull, 5)
		if err != nil || st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || st.Count() != 0 {
			return fmt.Errorf("Recv from ProcNull: %+v %v", st, err)
		}
		r1, _ := mpi.Irecv(w, make([]int, 1), mpi.ProcNull, 0)
		r2, _ := mpi.Isend(w, []int{1}, mpi.ProcNull, 0)
		if i, _, err := mpi.Waitany([]*mpi.Request{nil, r1}); i != 1 || err != nil {
			return fmt.Errorf("Waitany on a ProcNull request: %d %v", i, err)
		}
		if ok, _, err := mpi.Testall([]*mpi.Request{r2}); !ok || err != nil {
			return fmt.Errorf("Testall on a ProcNull request: %v %v", ok, err)
		}
		_, err = mpi.Sendrecv(w, []int{1}, mpi.ProcNull, 0, make([]int, 1), mpi.ProcNull, 0)
		return err
	}
}

func TestProcNull(t *testing.T) { job{np: 2, cas: "procnull"}.ok(t) }
