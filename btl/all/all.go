// Package all is the one list of gorun's built-in transports: importing it
// registers each of them with package btl. Package mpi imports it to open
// them, and gorun to list their tunables in --help-params.
//
// Adding a transport means one line here (see "Adding a transport" in
// btl/doc.go); one that needs a build tag (libfabric's, say) gets its line
// in a file of its own with that tag.
package all

import (
	_ "github.com/gorun/gorun/btl/cuda" // GPU memory between ranks of one host (CUDA IPC)
	_ "github.com/gorun/gorun/btl/self" // a rank to itself
	_ "github.com/gorun/gorun/btl/sm"   // ranks of one host (shared memory)
	_ "github.com/gorun/gorun/btl/tcp"  // any ranks (TCP)
)
