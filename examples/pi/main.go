// Pi is the classic cpi: midpoint integration of 4/(1+x²) over [0,1] with
// n intervals shared round-robin among the ranks, summed by Reduce at rank
// 0. Usage: pi [N] (default 1000000). tests/openmpi/pi.c is the same
// program in C for Open MPI.
package main

import (
	"fmt"
	"log"
	"math"
	"os"
	"strconv"

	"github.com/gorun/gorun/mpi"
)

func f(x float64) float64 { return 4.0 / (1.0 + x*x) }

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	n := []int64{1000000}
	if w.Rank() == 0 && len(os.Args) > 1 {
		v, err := strconv.ParseInt(os.Args[1], 10, 64)
		if err != nil || v < 1 {
			log.Fatalf("pi: intervals must be a positive integer, not %q", os.Args[1])
		}
		n[0] = v
	}
	if err := mpi.Bcast(w, n, 0); err != nil {
		log.Fatal(err)
	}
	h := 1.0 / float64(n[0])
	sum := 0.0
	for i := int64(w.Rank()) + 1; i <= n[0]; i += int64(w.Size()) {
		sum += f(h * (float64(i) - 0.5))
	}
	mypi := []float64{h * sum}
	pi := []float64{0}
	if err := mpi.Reduce(w, mypi, pi, mpi.Sum, 0); err != nil {
		log.Fatal(err)
	}
	if w.Rank() == 0 {
		fmt.Printf("pi is approximately %.16f, error is %.16f\n", pi[0], math.Abs(pi[0]-3.141592653589793238462643))
	}
}
