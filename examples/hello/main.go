// Hello prints one line per rank: `rank R of N on HOST`.
package main

import (
	"fmt"
	"log"

	"github.com/gorun/gorun/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	fmt.Printf("rank %d of %d on %s\n", w.Rank(), w.Size(), mpi.ProcessorName())
}
