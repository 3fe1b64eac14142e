// Package launcher starts and supervises a gorun job: it resolves the
// program (building a Go package directory once), creates the job secret,
// runs the memberlist seed that collects every rank's business card and
// pushes the roster, spawns the ranks with their environment, forwards their
// stdio line by line, and ends the job cleanly on the first failure, on a
// signal, on Abort or on timeout, leaving no process, temp file or shared
// memory segment behind.
//
// Run is the entry point; cmd/gorun only parses flags into a Spec. Run
// blocks until the job has ended and every rank has been reaped. Its result
// is the exit status gorun should return (see the Exit* constants) plus,
// for failures of gorun itself, an error.
//
// launcher must not import package mpi.
package launcher
