package btl

import "github.com/gorun/gorun/internal/params"

// Enabled is GORUN_BTL: the transports a rank may open, in the syntax of
// ParseFilter. Package mpi reads it at Init (a world of one opens only
// self, whatever it says); gorun --help-params lists it.
var Enabled = params.String("GORUN_BTL", "",
	`transports to use: "tcp,self" (only these) or "^sm" (all but these); empty means all`)
