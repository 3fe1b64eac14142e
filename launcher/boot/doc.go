// Package boot is the rank side of the wire-up, and the vocabulary that the
// launcher and the ranks share.
//
// A rank started by gorun finds its place in the environment (env.go) and
// its job secret on an inherited control socket (ctl.go), never in argv or
// a file. Init then joins the job's memberlist, encrypted with a key derived
// from the secret, publishing the rank's business card (transport
// addresses) as node metadata; the launcher, which knows the world size,
// waits until every rank has joined and pushes the complete roster to each
// (gossip alone converges in seconds at 32+ nodes; the push makes Init a
// fence of milliseconds). After Init memberlist is the failure detector:
// Session.Failures reports ranks declared dead.
//
// The control socket carries the rank's life-cycle to the launcher: that it
// finalized, or that it aborts with a code. Without gorun (no GORUN_RANK in
// the environment) a rank is a singleton world of size 1 and nothing here
// touches the network.
//
// boot knows nothing of tags, communicators or transports' internals.
package boot
