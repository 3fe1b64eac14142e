package coll

import "testing"

// TestPushNumbering: push launches take the two sets in turn, and a set
// is written again only after an acknowledgement of a launch after the one
// that last wrote it (an ipc call's write counts, as its call's last
// number), also past 2^32 calls; a call's launches (phases 0-2: the
// two-shot allreduce) are numbered apart, before the next call's.
func TestPushNumbering(t *testing.T) {
	st := &ipcState{}
	c := &Comm{}
	type step struct {
		seq       uint64
		phase     int
		ipc       bool
		wantSet   int
		wantNeed  uint64
		wantNum   uint64
		wantWrote [2]uint64
	}
	for i, s := range []step{
		{seq: 3, wantSet: 1, wantNeed: 0, wantNum: 12, wantWrote: [2]uint64{0, 12}},
		{seq: 5, wantSet: 0, wantNeed: 0, wantNum: 20, wantWrote: [2]uint64{20, 12}},
		{seq: 7, wantSet: 1, wantNeed: 13, wantNum: 28, wantWrote: [2]uint64{20, 28}},
		// An ipc call of odd sequence writes set 1 (its parity), as its
		// call's last launch number.
		{seq: 9, ipc: true, wantWrote: [2]uint64{20, 39}},
		{seq: 10, wantSet: 0, wantNeed: 21, wantNum: 40, wantWrote: [2]uint64{40, 39}},
		{seq: 12, wantSet: 1, wantNeed: 40, wantNum: 48, wantWrote: [2]uint64{40, 48}},
		// A two-shot call of three launches: each needs its set's last
		// writer's successor acknowledged (the second launch: the
		// previous call's; the third: the second's), and so does the
		// next call.
		{seq: 13, wantSet: 0, wantNeed: 41, wantNum: 52, wantWrote: [2]uint64{52, 48}},
		{seq: 13, phase: 1, wantSet: 1, wantNeed: 49, wantNum: 53, wantWrote: [2]uint64{52, 53}},
		{seq: 13, phase: 2, wantSet: 0, wantNeed: 53, wantNum: 54, wantWrote: [2]uint64{54, 53}},
		{seq: 14, wantSet: 1, wantNeed: 54, wantNum: 56, wantWrote: [2]uint64{54, 56}},
		{seq: 15, wantSet: 0, wantNeed: 55, wantNum: 60, wantWrote: [2]uint64{60, 56}},
		{seq: 0xffffffff, wantSet: 1, wantNeed: 57, wantNum: 0x3fffffffc, wantWrote: [2]uint64{60, 0x3fffffffc}},
		{seq: 1<<32 | 1, wantSet: 0, wantNeed: 61, wantNum: 4<<32 | 4, wantWrote: [2]uint64{4<<32 | 4, 0x3fffffffc}},
		{seq: 1<<32 | 2, wantSet: 1, wantNeed: 0x3fffffffd, wantNum: 4<<32 | 8, wantWrote: [2]uint64{4<<32 | 4, 4<<32 | 8}},
	} {
		c.seq = s.seq
		if s.ipc {
			st.ipcWrote(c)
		} else {
			pc := st.nextPush(c, s.phase)
			if pc.Set != s.wantSet || pc.Need != s.wantNeed || pc.Seq != s.wantNum {
				t.Errorf("step %d (seq %d phase %d): set %d need %d num %#x, want %d %d %#x", i, s.seq, s.phase, pc.Set, pc.Need, pc.Seq, s.wantSet, s.wantNeed, s.wantNum)
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
