package coll

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// queryNotice is the query notice rank 1 sends about call seq, run as rec.
func queryNotice(seq uint32, rec callRec) []byte {
	b := notice(noticeQuery, seq, 1)
	putU32(b[12:], uint32(rec.coll)<<16|uint32(rec.alg))
	b = b[:noticeHdr+8]
	putU64(b[noticeHdr:], uint64(rec.size))
	return b
}

// TestRecordMeetsQuery: record of call i (without the lock) races take of
// a query about call i (under it), round after round; every query is
// handled by exactly one of them (none left in queries, no mismatch
// reported for matching calls) and nQuery stays len(queries).
func TestRecordMeetsQuery(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two goroutines running at once (GOMAXPROCS >= 2)")
	}
	s := &shared{}
	const rounds = 50000
	rec := callRec{coll: 3, alg: 2, size: 64}
	var round, done atomic.Uint32
	var errs atomic.Int32
	go func() {
		for i := uint32(1); i <= rounds; i++ {
			for k := 0; round.Load() != i; k++ {
				if k&1023 == 1023 {
					runtime.Gosched()
				}
			}
			if err := s.record(&Comm{sh: s, seq: uint64(i)}, rec); err != nil {
				errs.Add(1)
			}
			done.Store(i)
		}
	}()
	for i := uint32(1); i <= rounds; i++ {
		round.Store(i)
		s.mu.Lock()
		s.take(queryNotice(i, rec))
		s.mu.Unlock()
		for k := 0; done.Load() != i; k++ {
			if k&1023 == 1023 {
				runtime.Gosched()
			}
		}
		s.mu.Lock()
		_, left := s.queries[i]
		n, q := len(s.queries), s.nQuery.Load()
		s.mu.Unlock()
		if left || int(q) != n || errs.Load() != 0 {
			t.Fatalf("round %d: query left unhandled %v, nQuery %d for %d queries, %d mismatches reported", i, left, q, n, errs.Load())
		}
	}
}

// TestDropStale: of the queries waiting at call 100000, the one about a
// call 2^16 or more behind goes; a recent one and one about a later call
// stay; nQuery follows.
func TestDropStale(t *testing.T) {
	s := &shared{queries: map[uint32]callRec{}}
	for _, k := range []uint32{1, 99000, 100005} {
		s.queries[k] = callRec{seq: k}
	}
	s.nQuery.Store(int32(len(s.queries)))
	s.dropStale(100000)
	_, old := s.queries[1]
	_, recent := s.queries[99000]
	_, later := s.queries[100005]
	if old || !recent || !later || s.nQuery.Load() != 2 {
		t.Fatalf("after dropStale(100000): call 1 kept %v, 99000 kept %v, 100005 kept %v, nQuery %d", old, recent, later, s.nQuery.Load())
	}
}
