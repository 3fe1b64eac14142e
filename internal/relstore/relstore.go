// Package relstore stores a word with release order only: every load and
// store before it in program order is visible to another thread before
// the stored value is, and nothing more. A reader pairs it with an atomic
// load (sync/atomic), which then also sees what the writer stored before.
//
// sync/atomic's stores are sequentially consistent: on amd64 an XCHG,
// which waits for every store still in the core's store buffer to reach
// the cache, a wait that costs most when one of them misses (a line the
// other side of a ring holds). On amd64 (total store order) an ordinary
// MOV already has release order; the Go compiler does not move loads or
// stores across a call to an assembly function, so the store stays
// after everything the caller did before. Under the race detector, and on
// other architectures (arm64's atomic store is a store-release already),
// the stores are sync/atomic's.
//
// A release store does not order a later load: a store followed by a
// load of another word that must not pass it (Dekker: "set my flag, then
// read yours") needs sync/atomic's store.
package relstore
