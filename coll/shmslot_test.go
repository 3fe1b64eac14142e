package coll

import "testing"

// TestShmSlotShape: whatever GORUN_COLL_SHM_MAX (whole lines, as shmMax
// makes it) and GORUN_COLL_SHM_SEGMENT say, the slot is whole lines (the
// ready and done words after each rank's slots stay 8-byte aligned for
// the atomics), not halved below shmLeastSlot, and within the segment's
// cap unless at that least slot.
func TestShmSlotShape(t *testing.T) {
	for _, max := range []int{1 << 20, 1048512, 1000000 &^ (line - 1), 65536, 4160, 64} {
		for _, seg := range []int{64 << 20, 128 << 20, 4 << 20, 1, 0, -5} {
			for _, n := range []int{2, 3, 4, 17, 64, 65, 1000, 4096} {
				s := shmSlotOf(n, max, seg)
				if s <= 0 || s%line != 0 {
					t.Fatalf("max %d, segment %d, n %d: slot %d, want whole lines", max, seg, n, s)
				}
				if s < shmLeastSlot && s != min(max, shmSmallSlot) {
					t.Fatalf("max %d, segment %d, n %d: slot %d halved below %d", max, seg, n, s, shmLeastSlot)
				}
				if n*2*s > seg && s > shmLeastSlot {
					t.Fatalf("max %d, segment %d, n %d: slot %d passes the cap", max, seg, n, s)
				}
			}
		}
	}
}
