package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["coll-report"] = caseCollReport }

// reportLine is a rank's line of GORUN_COLL_REPORT: its rank and counts.
var reportLine = regexp.MustCompile(`(?m)^gorun: rank (\d+): collectives: (.*)$`)

// checkRan fails t unless each of the np ranks of r (run with
// GORUN_COLL_REPORT=1) reports at least one call of every algorithm in
// algs (collective/algorithm) and at least one GPU push launch of every
// kind in pushes (devCall.push's names: "allreduce", "reduce-scatter",
// "allreduce (reduce-scatter)", ...) that ran its kernels: a forced
// algorithm that fell back to another would pass a results check for the
// wrong reason.
func checkRan(t *testing.T, r result, np int, algs, pushes []string) {
	t.Helper()
	for _, e := range ranErrors(r, np, algs, pushes) {
		t.Error(e)
	}
}

// ranErrors is what checkRan finds missing.
func ranErrors(r result, np int, algs, pushes []string) []string {
	got := reportLine.FindAllStringSubmatch(r.stderr, -1)
	if len(got) != np {
		return []string{fmt.Sprintf("%d report lines for %d ranks (GORUN_COLL_REPORT=1)\nstderr:\n%s", len(got), np, r.stderr)}
	}
	var errs []string
	for _, g := range got {
		colls, push, _ := strings.Cut(g[2], "; GPU push:")
		for _, a := range algs {
			if !regexp.MustCompile(`(^|, )` + regexp.QuoteMeta(a) + ` [1-9]`).MatchString(colls) {
				errs = append(errs, fmt.Sprintf("rank %s ran no %s: %s", g[1], a, g[2]))
			}
		}
		for _, k := range pushes {
			if !regexp.MustCompile(`(^|,) ` + regexp.QuoteMeta(k) + ` [1-9][0-9]* ran`).MatchString(push) {
				errs = append(errs, fmt.Sprintf("rank %s ran no GPU push kernel for %s: %s", g[1], k, g[2]))
			}
		}
	}
	return errs
}

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
	line := reportLine
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
		if !strings.HasSuffix(g[2], "; GPU push: none") {
			t.Errorf("rank %s: GPU push calls counted in a job with none: %s", g[1], g[2])
		}
	}
	// checkRan, which the GPU tests use, on this report: what ran
	// passes; an algorithm that did not run, or GPU push kernels, fail.
	if e := ranErrors(r, 2, []string{"allreduce/ring", "bcast/shm"}, nil); len(e) > 0 {
		t.Errorf("checkRan refuses what ran: %v", e)
	}
	if e := ranErrors(r, 2, []string{"allreduce/recursive_doubling"}, nil); len(e) != 2 {
		t.Errorf("checkRan on an algorithm that did not run: %d errors, want one a rank: %v", len(e), e)
	}
	if e := ranErrors(r, 2, nil, []string{"allreduce"}); len(e) != 2 {
		t.Errorf("checkRan on GPU push kernels in a job with none: %d errors, want one a rank: %v", len(e), e)
	}
	// The GPU push part, on a made-up line: kinds that ran pass; one that
	// only fell back, one absent, and a prefix of a kind present fail.
	fake := result{stderr: "gorun: rank 0: collectives: gpu_allreduce/twoshot 3; GPU push: allreduce 2 ran 0 fell back," +
		" allreduce (reduce-scatter) 3 ran 0 fell back, reduce-scatter 0 ran 4 fell back\n"}
	if e := ranErrors(fake, 1, []string{"gpu_allreduce/twoshot"}, []string{"allreduce", "allreduce (reduce-scatter)"}); len(e) > 0 {
		t.Errorf("checkRan refuses GPU push kinds that ran: %v", e)
	}
	for _, k := range []string{"reduce-scatter", "allreduce (allgather)", "reduce"} {
		if e := ranErrors(fake, 1, nil, []string{k}); len(e) != 1 {
			t.Errorf("checkRan on GPU push kind %q that did not run its kernels: %v", k, e)
		}
	}
	if e := ranErrors(r, 3, nil, nil); len(e) != 1 {
		t.Errorf("checkRan with a rank's line missing: %v", e)
	}
	r = job{np: 2, cas: "coll-report"}.ok(t)
	if line.MatchString(r.stderr) {
		t.Errorf("a report without GORUN_COLL_REPORT:\n%s", r.stderr)
	}
}
