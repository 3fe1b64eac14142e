package tests

import (
	"fmt"
	"os"
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

// bcastShmCalls returns, for each rank's GORUN_COLL_REPORT line, how many
// bcasts ran in shared memory and how many otherwise.
func bcastShmCalls(t *testing.T, r result, np int) (shm, other []int) {
	t.Helper()
	got := reportLine.FindAllStringSubmatch(r.stderr, -1)
	if len(got) != np {
		t.Fatalf("%d report lines for %d ranks\nstderr:\n%s", len(got), np, r.stderr)
	}
	alg := regexp.MustCompile(`bcast/(\w+) (\d+)`)
	for _, g := range got {
		s, o := 0, 0
		for _, m := range alg.FindAllStringSubmatch(g[2], -1) {
			k, _ := strconv.Atoi(m[2])
			if m[1] == "shm" {
				s += k
			} else {
				o += k
			}
		}
		shm, other = append(shm, s), append(other, o)
	}
	return shm, other
}

// TestCollShmSlots: on 4 ranks the shared-memory collectives take
// messages up to 1 MiB (GORUN_COLL_SHM_MAX), and where /dev/shm cannot
// hold a segment of 1 MiB slots (a container's small /dev/shm) the set-up
// settles for smaller ones: the calls that fit still run in shared
// memory, the others run their point-to-point algorithms, and every
// result is right.
func TestCollShmSlots(t *testing.T) {
	const np = 4
	env := []string{"GORUN_COLL_REPORT=1"}
	t.Run("default", func(t *testing.T) {
		r := job{np: np, cas: "coll-shm-slot", env: env}.ok(t)
		shm, _ := bcastShmCalls(t, r, np)
		for rank, k := range shm {
			if k != len(shmSlotSizes) {
				t.Errorf("rank %d ran %d of the %d bcasts %v in shared memory, want all\nstderr:\n%s", rank, k, len(shmSlotSizes), shmSlotSizes, r.stderr)
			}
		}
	})
	t.Run("small-dev-shm", func(t *testing.T) {
		why := ""
		if os.Geteuid() != 0 {
			why = "needs root: mounts a small /dev/shm in a mount namespace of its own"
		} else if _, err := exec.LookPath("unshare"); err != nil {
			why = "needs unshare (util-linux)"
		}
		if why != "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but the test %s", why)
			}
			t.Skip(why)
		}
		c, out, errb, _ := job{np: np, cas: "coll-shm-slot", env: env}.cmd(t)
		// 6 MiB: less than the 8.4 MiB of 1 MiB slots at np=4, more than
		// the 4.2 of 512 KiB ones.
		c.Args = append([]string{"unshare", "-m", "sh", "-c", `mount -t tmpfs -o size=6m tmpfs /dev/shm && exec "$0" "$@"`}, c.Args...)
		unshare, _ := exec.LookPath("unshare")
		c.Path = unshare
		if err := c.Run(); err != nil {
			t.Fatalf("gorun under a 6 MiB /dev/shm: %v\nstdout:\n%s\nstderr:\n%s", err, out, errb)
		}
		r := result{stdout: out.String(), stderr: errb.String()}
		shm, other := bcastShmCalls(t, r, np)
		for rank := range shm {
			// The 1 MiB bcast left shared memory; the 8-byte one did not.
			if shm[rank] < 1 || shm[rank] >= len(shmSlotSizes) || other[rank] < 1 {
				t.Errorf("rank %d ran %d bcasts in shared memory and %d otherwise: want the small ones there and the 1 MiB one not\nstderr:\n%s", rank, shm[rank], other[rank], r.stderr)
			}
		}
	})
}
