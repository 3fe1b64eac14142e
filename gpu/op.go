package gpu

import "fmt"

// Op is an elementwise reduction operation of the project's kernels.
type Op uint8

// The reduction operations. Sums and products of integers wrap; min and max
// of floats ignore a NaN operand (C's fmin and fmax).
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
)

// Ops lists every Op.
var Ops = []Op{Sum, Prod, Min, Max}

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max"}

// Valid reports whether op is one of Ops.
func (op Op) Valid() bool { return op >= Sum && op <= Max }

// String returns the operation's name ("sum", "prod", "min", "max"), which
// is also its name in kernel names.
func (op Op) String() string {
	if !op.Valid() {
		return fmt.Sprintf("Op(%d)", uint8(op))
	}
	return opNames[op]
}
