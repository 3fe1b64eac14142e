package tests

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["coll-shm-slot"] = caseCollShmSlot }

// shmSlotSizes are the bcasts of caseCollShmSlot: one in the smallest
// segment's slot, one above 64 KiB, one of the largest slot (1 MiB).
var shmSlotSizes = []int{8, 200 << 10, 1 << 20}

// caseCollShmSlot broadcasts shmSlotSizes from rank 1 and allreduces as
// many bytes of int32s, checking every element.
func caseCollShmSlot(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	for _, size := range shmSlotSizes {
		b := make([]byte, size)
		if me == 1 {
			for i := range b {
				b[i] = byte(i*7 + size)
			}
		}
		if err := mpi.Bcast(w, b, 1); err != nil {
			return err
		}
		for i := range b {
			if b[i] != byte(i*7+size) {
				return fmt.Errorf("bcast of %d bytes: byte %d is %d, want %d", size, i, b[i], byte(i*7+size))
			}
		}
		x := make([]int32, size/4)
		for i := range x {
			x[i] = int32(me*i + size)
		}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
			return err
		}
		for i := range x {
			if want := int32(n*(n-1)/2*i + n*size); x[i] != want {
				return fmt.Errorf("allreduce of %d bytes: element %d is %d, want %d", size, i, x[i], want)
			}
		}
	}
	return nil
}

// bcastShmCalls returns how many bcasts each rank's GORUN_COLL_REPORT line
// counts in shared memory.
func bcastShmCalls(t *testing.T, r result, np int) []int {
	t.Helper()
	got := reportLine.FindAllStringSubmatch(r.stderr, -1)
	if len(got) != np {
		t.Fatalf("%d report lines for %d ranks\nstderr:\n%s", len(got), np, r.stderr)
	}
	var shm []int
	for _, g := range got {
		k := 0
		if m := regexp.MustCompile(`bcast/shm (\d+)`).FindStringSubmatch(g[2]); m != nil {
			k, _ = strconv.Atoi(m[1])
		}
		shm = append(shm, k)
	}
	return shm
}

// shmUnderTmpfs runs j with a /dev/shm of its own, a tmpfs of size (as
// mount's size=), in a mount namespace; it needs root and unshare
// (skipped without them, failed under CI=true).
func shmUnderTmpfs(t *testing.T, j job, size string) result {
	t.Helper()
	needRoot(t, "unshare", "mounts a /dev/shm of its own in a mount namespace")
	c, out, errb, _ := j.cmd(t)
	c.Args = append([]string{"unshare", "-m", "sh", "-c", `mount -t tmpfs -o size=` + size + ` tmpfs /dev/shm && exec "$0" "$@"`}, c.Args...)
	c.Path, _ = exec.LookPath("unshare")
	if err := c.Run(); err != nil {
		t.Fatalf("gorun -np %d under a %s /dev/shm: %v\nstdout:\n%s\nstderr:\n%s", j.np, size, err, out, errb)
	}
	return result{stdout: out.String(), stderr: errb.String()}
}

// TestCollShmSlots: on 4 ranks the shared-memory collectives take
// messages up to 1 MiB (GORUN_COLL_SHM_MAX) where /dev/shm has room; a
// communicator's segment takes at most an eighth of /dev/shm's free
// space, so under a container's 64 MiB it has slots of 512 KiB (4.2 MiB
// at np=4; 1 MiB slots would take 8.4) and the 1 MiB bcast runs its
// point-to-point algorithm, and where even that does not fit, the least
// segment (64 KiB slots) still serves the small calls; a /dev/shm without
// a limit (size=0: statfs reports no blocks) is no limit, not no room;
// and where /dev/shm cannot hold even the least segment, every rank runs
// the point-to-point algorithms. Every result is checked at every size.
func TestCollShmSlots(t *testing.T) {
	const np = 4
	j := job{np: np, cas: "coll-shm-slot", env: []string{"GORUN_COLL_REPORT=1"}}
	for _, tc := range []struct {
		tmpfs string
		shm   int // bcasts in shared memory, of shmSlotSizes
	}{{"1g", 3}, {"0", 3}, {"64m", 2}, {"6m", 1}, {"320k", 0}} { // size=0: no limit
		t.Run("dev-shm="+tc.tmpfs, func(t *testing.T) {
			r := shmUnderTmpfs(t, j, tc.tmpfs)
			for rank, k := range bcastShmCalls(t, r, np) {
				if k != tc.shm {
					t.Errorf("rank %d ran %d of the bcasts of %v bytes in shared memory, want %d\nstderr:\n%s", rank, k, shmSlotSizes, tc.shm, r.stderr)
				}
			}
		})
	}
}
