package launcher

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	cases := []struct {
		np      int
		slots   []int
		max     []int
		mapBy   string
		noOver  bool
		want    string // host of each rank, then local sizes
		oversub bool
		err     string
	}{
		{4, []int{2, 2}, []int{0, 0}, MapBySlot, false, "0 0 1 1 | 2 2", false, ""},
		{3, []int{2, 2}, []int{0, 0}, MapBySlot, false, "0 0 1 | 2 1", false, ""},
		{5, []int{2, 2, 2}, []int{0, 0, 0}, MapByNode, false, "0 1 2 0 1 | 2 2 1", false, ""},
		{4, []int{1, 3}, []int{0, 0}, MapByNode, false, "0 1 1 1 | 1 3", false, ""},
		{7, []int{1, 2, 1}, []int{0, 2, 0}, MapBySlot, false, "0 1 1 2 0 2 0 | 3 2 2", true, ""},
		{5, []int{2, 2}, []int{0, 0}, MapBySlot, true, "", false, "5 ranks do not fit in the 4 slots of a:2, b:2"},
		{5, []int{2, 2}, []int{2, 2}, MapBySlot, false, "", false, "exceed the max_slots"},
		{1, []int{1}, []int{0}, "core", false, "", false, "--map-by \"core\""},
	}
	for i, c := range cases {
		names := []string{"a", "b", "c"}[:len(c.slots)]
		l, err := plan(c.np, names, c.slots, c.max, c.mapBy, c.noOver)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("case %d: error %v, want %q", i, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("case %d: %v", i, err)
			continue
		}
		var hs, ls []string
		local := map[int]int{}
		for r, p := range l.ranks {
			hs = append(hs, fmt.Sprint(p.host))
			if p.local != local[p.host] {
				t.Errorf("case %d: rank %d has local rank %d, want %d", i, r, p.local, local[p.host])
			}
			local[p.host]++
		}
		for _, n := range l.localSize {
			ls = append(ls, fmt.Sprint(n))
		}
		if got := strings.Join(hs, " ") + " | " + strings.Join(ls, " "); got != c.want || l.oversub != c.oversub {
			t.Errorf("case %d: %q oversub %v, want %q oversub %v", i, got, l.oversub, c.want, c.oversub)
		}
	}
}

func TestBindMask(t *testing.T) {
	if got := bindMask([]int{0, 1, 2, 3}, []int{2}); got != "[././B/.]" {
		t.Errorf("bindMask: %q", got)
	}
}

// TestShareOf: the default binding gives each rank its own block of the
// host's CPUs, disjoint, all of the same size, and none when the ranks
// outnumber the CPUs.
func TestShareOf(t *testing.T) {
	cpus := []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16} // 7 offline
	for _, n := range []int{1, 2, 3, 5, 8, 16, 17} {
		seen := map[int]bool{}
		for local := range n {
			set := shareOf(cpus, n, local)
			if n > len(cpus) {
				if set != nil {
					t.Errorf("n=%d: rank %d bound to %v, want unbound", n, local, set)
				}
				continue
			}
			if len(set) != len(cpus)/n {
				t.Errorf("n=%d: rank %d bound to %d CPUs %v, want %d", n, local, len(set), set, len(cpus)/n)
			}
			for _, c := range set {
				if seen[c] || !slices.Contains(cpus, c) {
					t.Errorf("n=%d: rank %d bound to CPU %d: taken already, or not usable", n, local, c)
				}
				seen[c] = true
			}
		}
	}
	if got := cpuList([]int{0, 1, 2, 3, 8, 10, 11}); got != "CPUs 0-3,8,10-11" {
		t.Errorf("cpuList: %q", got)
	}
}
