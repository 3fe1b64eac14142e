package tests

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: the predefined attributes MPI_UNIVERSE_SIZE and MPI_APPNUM.

func init() {
	rankCases["appnum"] = func(w *mpi.Comm) error {
		var vals []int
		for _, k := range []mpi.Keyval{mpi.KeyAppNum, mpi.KeyUniverseSize, mpi.KeyTagUB} {
			v, ok, err := w.GetAttr(k)
			if err != nil || !ok {
				return fmt.Errorf("GetAttr(%d): %v %v %v", k, v, ok, err)
			}
			vals = append(vals, v.(int))
			if err := w.SetAttr(k, 1); !errors.Is(err, mpi.ErrKeyval) {
				return fmt.Errorf("SetAttr(%d): %v, want ErrKeyval", k, err)
			}
			if err := w.DeleteAttr(k); !errors.Is(err, mpi.ErrKeyval) {
				return fmt.Errorf("DeleteAttr(%d): %v, want ErrKeyval", k, err)
			}
			if err := mpi.FreeKeyval(k); !errors.Is(err, mpi.ErrKeyval) {
				return fmt.Errorf("FreeKeyval(%d): %v, want ErrKeyval", k, err)
			}
		}
		// The same on every communicator.
		self, _, _ := mpi.Self().GetAttr(mpi.KeyAppNum)
		fmt.Printf("rank %d appnum %d universe %d tagub %v self %v\n", w.Rank(), vals[0], vals[1], vals[2] == mpi.TagUB, self == vals[0])
		return nil
	}
}

// TestAppnumUniverse: in an MPMD job of two programs on a host with 7
// slots, the first program's rank has appnum 0 and the second's two
// ranks 1, and every rank sees a universe of 7; with more ranks than
// slots (oversubscribed) the universe is the job's size.
func TestAppnumUniverse(t *testing.T) {
	self := os.Args[0]
	r := job{np: 1, flags: []string{"-H", "localhost:7"}, args: []string{"-x", "GORUN_TEST_CASE=appnum", self, "-test.run=^$",
		":", "-np", "2", "-x", "GORUN_TEST_CASE=appnum", self, "-test.run=^$"}}.ok(t)
	for _, want := range []string{"rank 0 appnum 0 universe 7", "rank 1 appnum 1 universe 7", "rank 2 appnum 1 universe 7"} {
		if !strings.Contains(r.stdout, want+" tagub true self true\n") {
			t.Errorf("missing %q in:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	r = job{np: 3, cas: "appnum", flags: []string{"-H", "localhost:2", "--oversubscribe"}}.ok(t)
	for rank := range 3 {
		if want := fmt.Sprintf("rank %d appnum 0 universe 3 tagub true self true\n", rank); !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
}
