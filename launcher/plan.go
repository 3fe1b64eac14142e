package launcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mapping policies (--map-by).
const (
	MapBySlot = "slot" // fill each host's slots before the next (Open MPI's default)
	MapByNode = "node" // one rank per host in turn
)

// Binding policies (--bind-to).
const (
	BindNone = "none" // the kernel places ranks
	BindCore = "core" // rank with local rank i runs on the host's i-th usable CPU only
	// The default (""): core on a host whose ranks fit its CPUs, none on
	// an oversubscribed one.
)

// placement is where one rank runs.
type placement struct {
	host  int // index into the job's host list
	local int // local rank on that host
}

// layout is the result of mapping ranks onto hosts.
type layout struct {
	ranks     []placement
	localSize []int // ranks per host
	slots     int   // total slots
	oversub   bool  // more ranks than slots somewhere
}

// plan maps np ranks onto hosts whose slot counts are slots[i] (already
// resolved: no zeros) and hard limits maxSlots[i] (0: none). Ranks beyond
// the slots are spread one per host in turn (oversubscription), unless
// noOversub, and never beyond a host's max_slots. It is pure: the tests
// check it as a table.
func plan(np int, names []string, slots, maxSlots []int, mapBy string, noOversub bool) (layout, error) {
	n := len(slots)
	l := layout{ranks: make([]placement, 0, np), localSize: make([]int, n)}
	for _, s := range slots {
		l.slots += s
	}
	if np > l.slots && noOversub {
		return l, usagef("%d ranks do not fit in the %d slots of %s, and --nooversubscribe was given", np, l.slots, describeSlots(names, slots))
	}
	put := func(h int) {
		l.ranks = append(l.ranks, placement{host: h, local: l.localSize[h]})
		l.localSize[h]++
	}
	switch mapBy {
	case MapBySlot, "":
		for h := 0; h < n && len(l.ranks) < np; h++ {
			for k := 0; k < slots[h] && len(l.ranks) < np; k++ {
				put(h)
			}
		}
	case MapByNode:
		for len(l.ranks) < np {
			placed := false
			for h := 0; h < n && len(l.ranks) < np; h++ {
				if l.localSize[h] < slots[h] {
					put(h)
					placed = true
				}
			}
			if !placed {
				break
			}
		}
	default:
		return l, fmt.Errorf("--map-by %q: expected slot or node", mapBy)
	}
	// Oversubscription: one more rank per host in turn, within max_slots.
	for len(l.ranks) < np {
		l.oversub = true
		placed := false
		for h := 0; h < n && len(l.ranks) < np; h++ {
			if maxSlots[h] == 0 || l.localSize[h] < maxSlots[h] {
				put(h)
				placed = true
			}
		}
		if !placed {
			return l, usagef("%d ranks exceed the max_slots of every host (%s)", np, describeSlots(names, maxSlots))
		}
	}
	return l, nil
}

func describeSlots(names []string, slots []int) string {
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s:%d", name, slots[i])
	}
	return b.String()
}

// cpuList names a set of CPUs as --report-bindings prints it: "CPU 3",
// "CPUs 0-7", "CPUs 0,2,4".
func cpuList(set []int) string {
	if len(set) == 1 {
		return fmt.Sprintf("CPU %d", set[0])
	}
	var parts []string
	for i := 0; i < len(set); {
		k := i
		for k+1 < len(set) && set[k+1] == set[k]+1 {
			k++
		}
		if k > i {
			parts = append(parts, fmt.Sprintf("%d-%d", set[i], set[k]))
		} else {
			parts = append(parts, strconv.Itoa(set[i]))
		}
		i = k + 1
	}
	return "CPUs " + strings.Join(parts, ",")
}

// bindMask renders the CPUs of a host with the bound ones marked, as
// --report-bindings prints it: [./B/./.].
func bindMask(cpus, set []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range cpus {
		if i > 0 {
			b.WriteByte('/')
		}
		if slices.Contains(set, c) {
			b.WriteByte('B')
		} else {
			b.WriteByte('.')
		}
	}
	b.WriteByte(']')
	return b.String()
}
