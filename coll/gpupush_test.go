package coll

import "testing"

// TestPushNumbering: push calls take the two sets in turn, and a set is
// written again only after an acknowledgement of a call after the one that
// last wrote it (an ipc call's write counts), also past 2^32 calls.
func TestPushNumbering(t *testing.T) {
	st := &ipcState{}
	c := &Comm{}
	type step struct {
		seq       uint64
		ipc       bool
		wantSet   int
		wantNeed  uint64
		wantNum   uint64
		wantWrote [2]uint64
	}
	for i, s := range []step{
		{seq: 3, wantSet: 1, wantNeed: 0, wantNum: 3, wantWrote: [2]uint64{0, 3}},
		{seq: 5, wantSet: 0, wantNeed: 0, wantNum: 5, wantWrote: [2]uint64{5, 3}},
		{seq: 7, wantSet: 1, wantNeed: 4, wantNum: 7, wantWrote: [2]uint64{5, 7}},
		// An ipc call of odd sequence writes set 1 (its parity).
		{seq: 9, ipc: true, wantWrote: [2]uint64{5, 9}},
		{seq: 10, wantSet: 0, wantNeed: 6, wantNum: 10, wantWrote: [2]uint64{10, 9}},
		{seq: 12, wantSet: 1, wantNeed: 10, wantNum: 12, wantWrote: [2]uint64{10, 12}},
		{seq: 0xffffffff, wantSet: 0, wantNeed: 11, wantNum: 0xffffffff, wantWrote: [2]uint64{0xffffffff, 12}},
		{seq: 1<<32 | 1, wantSet: 1, wantNeed: 13, wantNum: 1<<32 | 1, wantWrote: [2]uint64{0xffffffff, 1<<32 | 1}},
		{seq: 1<<32 | 2, wantSet: 0, wantNeed: 0x100000000, wantNum: 1<<32 | 2, wantWrote: [2]uint64{1<<32 | 2, 1<<32 | 1}},
	} {
		c.seq = s.seq
		if s.ipc {
			st.sets.Wrote[c.seq&1] = c.seq
		} else {
			pc := st.nextPush(c)
			if pc.Set != s.wantSet || pc.Need != s.wantNeed || pc.Seq != s.wantNum {
				t.Errorf("step %d (seq %d): set %d need %d num %#x, want %d %d %#x", i, s.seq, pc.Set, pc.Need, pc.Seq, s.wantSet, s.wantNeed, s.wantNum)
			}
		}
		if st.sets.Wrote != s.wantWrote {
			t.Errorf("step %d (seq %d): wrote %#x, want %#x", i, s.seq, st.sets.Wrote, s.wantWrote)
		}
	}
}

// TestIPCRegionSize: the two sets of slots stay within 64 MiB at every
// size the push kernels serve, and the kernels' words follow them.
func TestIPCRegionSize(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 9, 16, 32, 64, 128, 512} {
		st := &ipcState{n: n, slot: ipcSlot(n)}
		if slots := 2 * n * st.slot; slots > 64<<20 {
			t.Errorf("n=%d: slots of %d bytes take %d", n, st.slot, slots)
		}
		words := 8 * (2*n*128 + n + 128 + 1) // data words, acks, progress, count done
		if got := st.region() - ipcFlags(n, st.slot); got != words {
			t.Errorf("n=%d: %d bytes of words, want %d", n, got, words)
		}
	}
}

// TestGPUsApart: the resident kernel's host-wide rule. Ranks that each see
// GPUs of their own pass while CUDA sees just those GPUs and
// CUDA_VISIBLE_DEVICES is as at Init; else the count decides.
func TestGPUsApart(t *testing.T) {
	for _, c := range []struct {
		name                string
		devices, ranks, own int
		sameEnv, want       bool
	}{
		{"bound, one each", 1, 8, 1, true, true},
		{"bound, two each", 2, 4, 2, true, true},
		{"bound, CUDA sees more", 8, 8, 1, true, true}, // the count passes
		{"bound, CUDA sees more than its own", 2, 8, 1, true, false},
		{"bound, env changed", 1, 8, 1, false, false},
		{"not own, one visible", 1, 8, 0, true, false},
		{"enough GPUs", 8, 8, 0, true, true},
		{"too few GPUs", 4, 8, 0, true, false},
		{"one rank", 1, 1, 0, false, true},
	} {
		if got := gpusApart(c.devices, c.ranks, c.own, c.sameEnv); got != c.want {
			t.Errorf("%s: gpusApart(%d, %d, %d, %v) = %v, want %v", c.name, c.devices, c.ranks, c.own, c.sameEnv, got, c.want)
		}
	}
}
