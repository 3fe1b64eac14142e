// Package hostinfo reads the facts about one host that both sides of the
// agent protocol need: its network addresses and which of them ranks
// listen on (netif.go), the CPUs a process may run on, the state of a
// process, a file's quick identity, and the job's shared-memory segments
// to remove (host.go).
//
// Both the launcher (its own host's address for the membership seed) and
// every agent (its hello, its ranks' state, its cleanup) call it, from any
// goroutine; nothing here keeps state or blocks beyond a system call.
//
// hostinfo must not import mpi, p2p, coll or btl, nor the launcher.
package hostinfo
