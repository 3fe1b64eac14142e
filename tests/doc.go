// Package tests holds gorun's end-to-end tests: real gorun processes
// launching real ranks (this test binary re-executing itself as the rank
// program), over real sockets, and comparisons with Open MPI's mpirun on
// the project's C reference programs (tests/openmpi).
package tests
