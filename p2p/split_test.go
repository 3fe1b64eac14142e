package p2p

import "testing"

// TestSplitAgreement: whatever the receiver chooses (host memory's split,
// or each device mode), the flags of its CTS make the sender's part begin
// exactly where the receiver's ends, so that every byte is copied once.
func TestSplitAgreement(t *testing.T) {
	for _, mode := range []string{"", "put", "get", "half", "bogus"} {
		for _, accept := range []int{1, 100, splitMin - 1, splitMin, splitMin + 1, 3 << 20, 1<<30 + 7} {
			m := splitBy(accept, mode)
			if m < 0 || m > accept {
				t.Fatalf("mode %q, %d bytes: receiver's part %d", mode, accept, m)
			}
			if got := sendPart(ctsFlags(m, accept), accept); got != m {
				t.Errorf("mode %q, %d bytes: the receiver copies [0,%d), the sender from %d", mode, accept, m, got)
			}
		}
	}
	if splitBy(splitMin, "put") != 0 || splitBy(splitMin, "get") != splitMin || splitBy(splitMin, "half") != half(splitMin) {
		t.Errorf("device modes: put %d, get %d, half %d of %d", splitBy(splitMin, "put"), splitBy(splitMin, "get"), splitBy(splitMin, "half"), splitMin)
	}
}
