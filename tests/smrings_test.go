package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["sm-all-pairs"] = caseSmAllPairs }

// caseSmAllPairs has every rank exchange messages with every other
// (Sendrecv in a shifting ring, so that every ordered pair talks) three
// times over: 8 bytes (a short record), 12 KiB (eager: several records
// in a ring cut to 4 or 1 KiB ones) and 100 KiB (rendezvous), each byte
// checked.
func caseSmAllPairs(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	for round := range 3 {
		for _, size := range []int{8, 12 << 10, 100 << 10} {
			for k := 1; k < n; k++ {
				to, from := (me+k)%n, (me-k+n)%n
				b, r := make([]byte, size), make([]byte, size)
				for i := range b {
					b[i] = byte(i*31 + me*7 + to + round)
				}
				if _, err := mpi.Sendrecv(w, b, to, k, r, from, k); err != nil {
					return err
				}
				for i := range r {
					if want := byte(i*31 + from*7 + me + round); r[i] != want {
						return fmt.Errorf("round %d, %d bytes from rank %d: byte %d is %d, want %d", round, size, from, i, r[i], want)
					}
				}
			}
		}
	}
	return nil
}

// TestSmRingsFit: the shared-memory rings of a host's ranks take at most
// half of /dev/shm's free space, were every pair to talk: under a small
// /dev/shm (a container's is 64 MiB) every pair of 8 ranks still talks
// through shared memory, in smaller rings (one line from local rank 0
// says so), where 1 MiB rings sent the pairs that did not fit to TCP with
// a warning each. A /dev/shm with room keeps the full rings and says
// nothing. (The shapes are those of 4 KiB pages.)
func TestSmRingsFit(t *testing.T) {
	if p := os.Getpagesize(); p != 4096 {
		t.Skipf("the shapes below are for 4 KiB pages, not %d", p)
	}
	const np = 8
	j := job{np: np, cas: "sm-all-pairs"}
	for _, tc := range []struct {
		tmpfs string
		note  string // the line's ring shape; "" for none
	}{
		{"1g", ""},
		{"32m", "(16 records of up to 16 KiB)"}, // 1 MiB rings of 8 ranks take 56 MiB
		{"3m", "(4 records of up to 4 KiB)"},
		{"1m", "(2 records of up to 1 KiB)"}, // the least ring, 8 KiB
	} {
		t.Run("dev-shm="+tc.tmpfs, func(t *testing.T) {
			r := shmUnderTmpfs(t, j, tc.tmpfs)
			if strings.Contains(r.stderr, "using the next transport") {
				t.Errorf("pairs left shared memory:\n%s", r.stderr)
			}
			notes := strings.Count(r.stderr, "gorun: sm: /dev/shm has")
			switch {
			case tc.note == "" && notes != 0:
				t.Errorf("rings cut under a %s /dev/shm:\n%s", tc.tmpfs, r.stderr)
			case tc.note != "" && (notes != 1 || !strings.Contains(r.stderr, tc.note)):
				t.Errorf("want one line saying the rings were cut to %s:\n%s", tc.note, r.stderr)
			}
		})
	}
}

// TestSmRingsFull: rings of a shape the user set are kept at that size
// (GORUN_SM_SLOTS), so under a /dev/shm that cannot hold them all the
// pairs whose ring could not be backed say so and talk over TCP, every
// message still right: the sender backs its ring before any use
// (shmseg.Back), so a full /dev/shm is an error there and not a SIGBUS.
func TestSmRingsFull(t *testing.T) {
	const np = 8
	j := job{np: np, cas: "sm-all-pairs", env: []string{"GORUN_SM_SLOTS=16", "GORUN_SM_FRAG_SIZE=65536"}}
	r := shmUnderTmpfs(t, j, "8m") // 56 rings of 1 MiB want 56
	if !strings.Contains(r.stderr, "using the next transport") || !strings.Contains(r.stderr, "no room in /dev/shm") {
		t.Errorf("want pairs that say their ring found no room and use the next transport:\n%s", r.stderr)
	}
}

// TestSmBadTunables: a ring shape or eager limit out of its bounds is
// ignored with a warning naming what it wants, and the ranks still talk
// through shared memory (GORUN_BTL=sm,self leaves them no other way):
// such a value used to fail the transport's opening silently, and the
// job ran through TCP at a quarter of the bandwidth, or, with only sm
// allowed, failed in Init with "no transport reaches the peer".
func TestSmBadTunables(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"GORUN_SM_SLOTS=3", `ignoring GORUN_SM_SLOTS="3": want a power of two`},
		{"GORUN_SM_FRAG_SIZE=100", `ignoring GORUN_SM_FRAG_SIZE="100": want a multiple of 64`},
		{"GORUN_SM_EAGER_LIMIT=-1", `ignoring GORUN_SM_EAGER_LIMIT="-1": want 0 or more`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			r := job{np: 2, cas: "sm-all-pairs", env: []string{tc.env, "GORUN_BTL=sm,self"}}.ok(t)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
		})
	}
	// An ignored shape is no shape the user set: the rings still fit a
	// small /dev/shm (TestSmRingsFit's 32m case).
	t.Run("ignored-shape-fits", func(t *testing.T) {
		r := shmUnderTmpfs(t, job{np: 8, cas: "sm-all-pairs", env: []string{"GORUN_SM_SLOTS=3"}}, "32m")
		if !strings.Contains(r.stderr, "(16 records of up to 16 KiB)") {
			t.Errorf("want the rings cut to fit:\n%s", r.stderr)
		}
	})
}
