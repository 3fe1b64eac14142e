package mpi

import (
	"os"

	"github.com/gorun/gorun/internal/params"
)

// The collector's floor. Go collects when the heap has grown by GOGC
// percent over what the last collection found live, and never below 4 MiB.
// A rank's live heap is small (about 1 MiB: buffers are the program's,
// requests come from slabs), so a program posting nonblocking operations
// at the message rate (181 bytes a message: the Request, and Waitall's
// statuses) collected about 120 times a second per rank at np=2, each
// collection stopping a spinning rank for 1-2 ms, and the scavenger gave
// the freed pages back to the kernel only to fault them in again: half of
// the 8-byte osu_mbw_mr time (GOGC=400 doubled the rate, GOGC=1000 nearly
// tripled it; GOGC=off was slower still, every page fresh).
//
// Init therefore holds a floor: a pointer-free allocation of
// GORUN_GC_FLOOR bytes that counts as live heap, so that the collector's
// goal starts at twice that. Its pages are never written, so it costs
// address space, not memory (the kernel maps them on first touch, and
// nothing touches them); what it costs in memory is the garbage a rank may
// now accumulate between collections, up to about the floor. It is left
// out when the user steers the collector (GOGC or GOMEMLIMIT set), and
// GORUN_GC_FLOOR=0 turns it off.
var pGCFloor = params.Int("GORUN_GC_FLOOR", 64<<20,
	"bytes of heap the Go collector counts as live in every rank (never touched, so never resident): the collector's goal starts at twice this, instead of collecting every few MiB at the message rate; 0 turns it off, and GOGC or GOMEMLIMIT set in the environment leave it out")

var gcFloor []byte

// holdGCFloor sets the floor up at Init (once per process).
func holdGCFloor() {
	if gcFloor != nil || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if n := pGCFloor(); n > 0 {
		gcFloor = make([]byte, n)
	}
}
