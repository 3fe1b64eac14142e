package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["coll-report"] = caseCollReport }

// caseCollReport: five Allreduces and three Bcasts on the world, for the
// report of GORUN_COLL_REPORT at Finalize.
func caseCollReport(w *mpi.Comm) error {
	x := make([]int64, 8)
	for range 5 {
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
			return err
		}
	}
	for range 3 {
		if err := mpi.Bcast(w, x, 0); err != nil {
			return err
		}
	}
	return nil
}

// TestCollReport: with GORUN_COLL_REPORT=1 every rank prints, as it
// finalizes, the calls each collective algorithm ran: the forced
// allreduce algorithm (ring) and no other, the bcast's, and no GPU push;
// without it, nothing.
func TestCollReport(t *testing.T) {
	line := regexp.MustCompile(`(?m)^gorun: rank (\d+): collectives: (.*)$`)
	r := job{np: 2, cas: "coll-report", env: []string{"GORUN_COLL_REPORT=1", "GORUN_COLL_ALLREDUCE=ring"}}.ok(t)
	got := line.FindAllStringSubmatch(r.stderr, -1)
	if len(got) != 2 {
		t.Fatalf("%d report lines, want one a rank\nstderr:\n%s", len(got), r.stderr)
	}
	t.Log(strings.TrimSpace(r.stderr))
	entry := regexp.MustCompile(`([\w-]+)/([\w-]+) (\d+)`)
	for _, g := range got {
		counts := map[string]int{}
		allreduces := 0
		for _, e := range entry.FindAllStringSubmatch(strings.Split(g[2], ";")[0], -1) {
			n, _ := strconv.Atoi(e[3])
			counts[e[1]] += n
			if e[1] == "allreduce" {
				allreduces++
				if e[2] != "ring" {
					t.Errorf("rank %s: allreduce ran %s, forced to ring: %s", g[1], e[2], g[2])
				}
			}
		}
		if allreduces != 1 || counts["allreduce"] < 5 || counts["bcast"] < 3 {
			t.Errorf("rank %s: %d allreduce algorithms, %d allreduce and %d bcast calls, want ring alone, at least 5 and 3: %s",
				g[1], allreduces, counts["allreduce"], counts["bcast"], g[2])
		}
		if !strings.HasSuffix(g[2], "; GPU push: 0 ran, 0 fell back") {
			t.Errorf("rank %s: GPU push calls counted in a job with none: %s", g[1], g[2])
		}
	}
	r = job{np: 2, cas: "coll-report"}.ok(t)
	if line.MatchString(r.stderr) {
		t.Errorf("a report without GORUN_COLL_REPORT:\n%s", r.stderr)
	}
}
