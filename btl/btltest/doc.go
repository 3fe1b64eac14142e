// Package btltest is the conformance suite every transport (btl/self,
// btl/sm, btl/tcp and later ones) passes: a transport's test calls
//
//	btltest.Run(t, btltest.Transport{Name: "sm"})
//
// from a test of its own (importing the transport so that it registers).
//
// What it checks, against the contract of package btl:
//
//   - sizes: 0, 1, the eager limit -1/0/+1, the fragment size +1 and
//     64 MiB arrive intact, with their headers, in both directions at once;
//   - ordering: thousands of frames of mixed sizes arrive in send order
//     (FIFO per sender) while both sides send;
//   - outstanding: 20000 frames handed to Send before any Progress all
//     complete, once each, in order;
//   - back-pressure: 48 MiB sent to a receiver that does not poll queues in
//     the sender (Send never blocks, frames stay incomplete) and all of it
//     arrives once the receiver polls;
//   - close: on a connection that one frame has crossed already (a
//     transport may connect lazily, in Progress), Close completes every
//     queued frame with an error, Send afterwards fails, and the peer
//     hears of it (PeerFailed) in bounded time rather than waiting forever
//     for the rest of a frame;
//   - wait: a Waiter returns, and the frame that should end it arrives;
//   - death: a peer process killed (SIGKILL) in the middle of a 64 MiB
//     frame, sending or receiving, gives PeerFailed or a failed frame in
//     bounded time, never a hang and never a half frame delivered;
//   - connect: in a four-rank job, ranks 2 and 3 are strangers whose
//     addresses are sockets next to rank 0's that never answer (one
//     listens and never accepts, one accepts and stays silent). Each Send
//     to them returns within 1 s (a blocking dial takes the whole connect
//     timeout); 1000 round trips between ranks 0 and 1 complete meanwhile,
//     with no call holding rank 0's lock for a second; then the strangers'
//     frames fail and each stranger gets PeerFailed, instead of hanging.
//     Where the transport declares GORUN_<NAME>_CONNECT_TIMEOUT the case
//     sets it to 2 s. A transport whose address is not host:port (sm)
//     cannot be pointed at a stranger and skips;
//   - rma (modules implementing btl.RMA): regions registered by one rank
//     and passed through their wire encoding serve the other's Get and Put
//     at sizes from 1 byte to 4 MiB, in two parts at offsets as p2p's split
//     rendezvous uses them, with RMADone exactly once per operation and no
//     byte written outside the region; accesses past a region's end fail
//     and move nothing; a region registered twice survives one
//     Deregister; and a Get from a 64 MiB region of a child process killed
//     meanwhile ends in bounded time, failing once the child is gone.
//
// How. Two modules (ranks 0 and 1 of a two-rank job, on one "host") live
// in the test process, each driven by a goroutine of its own that holds a
// mutex around every call into its module, as p2p's engine does. A
// transport of the Loopback kind (self) gets a one-rank job and sends to
// itself. The death cases need a real second process: the test binary
// re-executes itself (as os/exec's tests do) with GORUN_BTLTEST_CHILD set,
// the child opens rank 1, and the two exchange addresses over the child's
// stdin and stdout. Every case has a deadline; on expiry the suite fails
// with the stacks of every goroutine.
//
// Run must be the only call of Run in its top-level test function: the
// child is started with -test.run=^<that function>$.
package btltest
