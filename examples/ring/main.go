// Ring passes a token around the ranks: every rank, rank 0 included when
// the token comes back, adds rank+1 to it. Rank 0 prints the token after
// each round. Usage: ring [ROUNDS] (default 3). tests/openmpi/ring.c is the
// same program in C for Open MPI.
package main

import (
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/gorun/gorun/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	rounds := 3
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 1 {
			log.Fatalf("ring: rounds must be a positive integer, not %q", os.Args[1])
		}
		rounds = n
	}
	w := mpi.World()
	me, n := w.Rank(), w.Size()
	next, prev := (me+1)%n, (me-1+n)%n
	tok := []int64{0}
	for k := 1; k <= rounds; k++ {
		if me == 0 {
			// Sendrecv also covers a ring of one, where rank 0 is its own
			// neighbour.
			if _, err := mpi.Sendrecv(w, tok, next, 1, tok, prev, 1); err != nil {
				log.Fatal(err)
			}
			tok[0] += int64(me + 1)
			fmt.Printf("round %d: token %d\n", k, tok[0])
			continue
		}
		if _, err := mpi.Recv(w, tok, prev, 1); err != nil {
			log.Fatal(err)
		}
		tok[0] += int64(me + 1)
		if err := mpi.Send(w, tok, next, 1); err != nil {
			log.Fatal(err)
		}
	}
	if me == 0 {
		fmt.Printf("ring done after %d rounds: token %d\n", rounds, tok[0])
	}
}
