package tests

import (
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Struct layouts (mpi.Fields over mpi.Bytes, MPI_Type_create_struct),
// issue 16: particles whose positions and ids go from every rank to the
// next, every other particle of the sender into consecutive particles of
// the receiver, leaving the fields not named alone; every rank's masses
// gathered by AllgatherLayout; against the particles as built.

func init() { rankCases["layout-struct"] = caseLayoutStruct }

type particle struct {
	Pos  [3]float64
	Vel  [3]float64
	ID   int32
	Mass float32
}

func makeParticle(rank, i int) particle {
	f := float64(rank*1000 + i)
	return particle{Pos: [3]float64{f, f + 0.25, f + 0.5}, Vel: [3]float64{-f, -f, -f}, ID: int32(rank*1000 + i), Mass: float32(f) / 8}
}

func caseLayoutStruct(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	right, left := (me+1)%n, (me-1+n)%n
	const k = 500 // 2k particles: 500 of them sent, past the eager limit
	ps := make([]particle, 2*k)
	for i := range ps {
		ps[i] = makeParticle(me, i)
	}
	got := make([]particle, k)
	for i := range got {
		got[i].Vel[1], got[i].Mass = 42, 42 // not sent: must stay
	}
	sb, err := mpi.Bytes(ps)
	if err != nil {
		return err
	}
	rb, err := mpi.Bytes(got)
	if err != nil {
		return err
	}
	posID := mpi.Fields[particle]("Pos", "ID")
	every2 := mpi.Vector(k, 1, 2).Of(posID)
	if _, err := mpi.SendrecvLayout(w, sb, every2, right, 5, rb, mpi.Contiguous(k).Of(posID), left, 5); err != nil {
		return err
	}
	for i, p := range got {
		want := makeParticle(left, 2*i)
		if p.Pos != want.Pos || p.ID != want.ID || p.Vel != [3]float64{0, 42, 0} || p.Mass != 42 {
			return fmt.Errorf("particle %d from rank %d: %+v, want Pos %v ID %d and the rest untouched", i, left, p, want.Pos, want.ID)
		}
	}

	// Every rank's masses: one field of each of my first 3 particles,
	// into rank r's 3 slots of all.
	all := make([]particle, 3*n)
	ab, err := mpi.Bytes(all)
	if err != nil {
		return err
	}
	mass := mpi.Contiguous(3).Of(mpi.Fields[particle]("Mass"))
	if err := mpi.AllgatherLayout(w, sb, mass, ab, mass); err != nil {
		return err
	}
	for r := range n {
		for i := range 3 {
			if got, want := all[3*r+i], makeParticle(r, i); got.Mass != want.Mass || got.ID != 0 {
				return fmt.Errorf("allgathered particle %d of rank %d: %+v, want Mass %v only", i, r, got, want.Mass)
			}
		}
	}
	return nil
}

func TestLayoutStruct(t *testing.T) { layoutJobs(t, 3, "layout-struct") }
