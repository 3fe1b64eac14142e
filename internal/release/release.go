// Package release stores a word for other processes to see, with release
// ordering only: every load and store before it, in program order, is
// visible before the word is.
//
// sync/atomic's stores are sequentially consistent. On amd64 that is an
// XCHG, a locked instruction that waits until the store owns its cache
// line; when the line was just read by the consumer polling it (a shared-
// memory ring's next record, a flag), that is a cross-core round trip
// spent on the spot: 97% of btl/sm's publish, which was a third of a
// sender's time at the 8-byte message rate (perf annotate, osu_mbw_mr at
// np=2). A release store needs no fence on amd64 (TSO keeps stores in
// order and never moves a store before an earlier load), so Store64 is a
// plain MOV, in assembly so that the compiler cannot move other memory
// accesses across it; the store then drains from the store buffer while
// the CPU goes on, until the next locked instruction (the engine lock's
// release, where perf now finds the rest of the wait). Where the
// architecture orders less, it is sync/atomic's store.
//
// A release store does not order itself before later loads (the Dekker
// pattern of a flag stored and then another read): use sync/atomic there.
package release
