// Package soak holds what the differential soaks (internal/collsoak,
// internal/p2psoak) and their programs (bench/collsoak, bench/p2psoak)
// share: the hash their data is made of, and the report of what ran.
package soak

import (
	"fmt"
	"io"
	"slices"
)

// Mix is splitmix64's finalizer (plus its increment): every input bit
// reaches every output bit, so inputs far apart (calls, ranks, elements,
// messages) get unrelated values.
func Mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// PrintCounts writes n's kinds in order, a line each: the kind padded to
// the longest, then its count.
func PrintCounts(w io.Writer, n map[string]int) {
	kinds := make([]string, 0, len(n))
	width := 0
	for k := range n {
		kinds = append(kinds, k)
		width = max(width, len(k))
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-*s %d\n", width, k, n[k])
	}
}
