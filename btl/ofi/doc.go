// Package ofi is the transport for RDMA fabrics, through libfabric: one
// module reaches InfiniBand and RoCE (the verbs provider, under ofi_rxm),
// AWS EFA (efa) and HPE Slingshot (cxi), as MPICH's ch4:ofi and Open MPI's
// mtl/ofi do, and libfabric's tcp provider runs the same code where no
// RDMA device exists (CI, this machine). docs/ofi.md tells users how to
// run it; this page is the contract, starting from btl/doc.go's.
//
// Building. The transport is compiled only with the build tag ofi (and
// cgo): `go build -tags ofi`, `GOFLAGS=-tags=ofi gorun ...` so that gorun's
// build of a program includes it. It needs libfabric's headers to build
// (Debian: libfabric-dev) but not its library: libfabric.so.1
// (GORUN_OFI_LIB) is loaded with dlopen at the first Open. Only six of its
// functions are exported symbols (fi_getinfo, fi_freeinfo, fi_dupinfo,
// fi_fabric, fi_strerror, fi_version); everything else (fi_send, fi_read,
// fi_cq_read, ...) is a static inline of the headers calling through the
// objects' ops tables, so a tagged binary links nothing of libfabric and
// runs on a host without it: Open fails, the registry skips the transport,
// and GORUN_OFI_VERBOSE=1 (or naming ofi in GORUN_BTL) prints why. Without
// the tag the package holds only its tunables (params.go), the wire format
// and the registration cache's logic, so that gorun --help-params lists
// GORUN_OFI_* in every build; "ofi" is then not a registered transport.
//
// Provider and selection. Open asks fi_getinfo for FI_EP_RDM endpoints
// with FI_MSG and FI_RMA, send-after-send ordering (FI_ORDER_SAS) and
// FI_THREAD_DOMAIN (the engine lock serializes every call), accepting the
// memory-registration modes FI_MR_LOCAL, VIRT_ADDR, ALLOCATED, PROV_KEY and
// ENDPOINT. Of the providers offered it takes the best by core: cxi, efa,
// opx, psm3 first, then verbs, then tcp; shm, udp and rxd never (they reach
// no other host or are not reliable alone). GORUN_OFI_PROVIDER forces one
// ("verbs;ofi_rxm", "efa", "tcp;ofi_rxm"). IP-based providers (tcp, verbs)
// are bound to the rank's BindAddr, as btl/tcp is (127.0.0.1 when unset).
// On RDMA hardware the module's exclusivity is above btl/tcp's, so ofi
// carries traffic between hosts; with only the tcp provider it is below,
// and Open declines unless GORUN_BTL names ofi or GORUN_OFI_PROVIDER is
// set: btl/tcp stays the default, GORUN_BTL=ofi,sm,self selects ofi.
// btl/sm stays the route between ranks of one host whenever it is open.
// FI_HMEM (GPUDirect RDMA) is reported by GORUN_OFI_VERBOSE where a
// provider offers it; the module does not use it yet: device memory is
// staged by p2p through pinned host memory (btl/cuda's Stager).
//
// Business card (Address): the provider's name, the fabric's name and the
// endpoint's address (fi_getname), wire.go. Reach enters a peer's address
// into the address vector (fi_av_insert) from the roster; a peer whose
// card names another provider or fabric is not reachable by this module.
//
// Messages. Every message is one provider message (fi_send) of at most
// fragSize (16 KiB, rxm's eager size, so the provider adds no rendezvous
// of its own) with a 24-byte header: type, source rank, job cookie,
// sequence number (wire.go). A frame goes as a first fragment (the
// frame's length and btl.Header, then data) and continuations; frames up
// to 16 KiB less 80 bytes are one message. The eager limit is that on
// RDMA hardware and 64 KiB on the tcp provider (module.go says why). Payloads are
// copied into one of 128 registered send buffers, and received into one of
// 128 receive buffers that stay posted (fi_recv with FI_ADDR_UNSPEC) and
// are copied out into the slice Handler.Begin gives. A frame that fits the
// provider's inject size goes by fi_inject and completes inside Send.
// Send never blocks: with no send buffer free, or the provider answering
// -FI_EAGAIN, the frame waits in the peer's queue, and Progress resumes
// it. The first message to each peer is a hello carrying this rank's card,
// so that a rank only receiving from a peer (not yet reached) can probe it.
//
// Order and authentication. The provider keeps send-after-send order
// between two endpoints; the sequence number checks it, and a message out
// of order fails that peer (a protocol error, never a panic). The cookie
// is derived from the job secret (HMAC-SHA256): a process that does not
// know the secret cannot inject a message; messages with the wrong cookie
// are dropped and logged. The cookie travels in clear: it keeps strangers
// out, as on a fabric where only the job's processes can address each
// other; it does not resist an eavesdropper on the fabric.
//
// RMA. The module implements btl.RMA for host memory with every peer it
// reaches, except a peer of this host that btl/sm also reaches (p2p takes
// the first module in registry order that offers RMA, and "ofi" sorts
// before "sm"). Its completion semantics:
//
//   - Register: synchronous. fi_mr_reg (bound to the endpoint where the
//     provider wants FI_MR_ENDPOINT) through the registration cache
//     (cache.go): registrations are found again by address and length,
//     counted, and once unused kept up to GORUN_OFI_MR_CACHE bytes in LRU
//     order, then closed. A cached registration pins its Go memory
//     (runtime.Pinner): the collector can neither move nor free it, so no
//     other buffer can appear under a stale registration. The region's key
//     is the provider's 64-bit key; Addr is the virtual address with
//     FI_MR_VIRT_ADDR, else 0 (offsets).
//   - Get: fi_read into the local buffer (registered through the same
//     cache, for FI_MR_LOCAL providers), in parts of at most the
//     provider's largest message. RMADone, from Progress, once every part
//     completed: the bytes are in local memory. This is the zero-copy
//     rendezvous: the receiver pulls the sender's buffer into its own.
//   - Put: fi_writemsg with FI_DELIVERY_COMPLETE, so that RMADone means
//     the bytes are in the target's memory (p2p's FIN after a Put is not
//     ordered behind it).
//   - Accesses outside the region, a key of the wrong size, device memory
//     and a failed peer are refused (an error, no RMADone). At most 64
//     parts are in flight; more wait in order.
//
// Progress and waiting. Progress reads the completion queue (fi_cq_read,
// which also runs the provider's manual progress), posts receive buffers
// again, and resumes queued frames and RDMA. The module is a btl.Waiter:
// Wait sleeps in ppoll on the completion queue's wait fd (FI_WAIT_FD)
// after fi_trywait says nothing is pending; a provider without one sleeps
// at most 50 µs.
//
// Failures. A send, probe or RDMA operation that completes with an error
// fails its peer: queued frames and RDMA fail, a half-received frame is
// dropped (never delivered), and Handler.PeerFailed is called once. The
// provider says nothing of a peer that only sends to this rank, so a peer
// the module waits on (a frame half received, frames or RDMA in flight)
// that stays silent for GORUN_OFI_PROBE (300 ms) is probed with a small
// message. A peer whose process died can refuse connections forever
// without an error (rxm answers -FI_EAGAIN while it reconnects, measured
// with libfabric 1.17's tcp provider), so a peer to which every send has
// been refused, with nothing of this rank's in flight, for
// GORUN_OFI_CONNECT_TIMEOUT (10 s, btl/tcp's bound) fails with an error
// wrapping os.ErrDeadlineExceeded. Measured here (btltest): a receiver
// killed mid-frame is seen in about 1 ms (connection reset); a sender
// killed mid-frame and a closed peer in the connect timeout plus a probe
// interval. In a job the membership's failure detector (about 0.5 s)
// usually reports a dead rank first. Close completes everything pending
// with btl.ErrClosed after closing the endpoint.
//
// Concurrency is btl/doc.go's: every call with the engine lock held, no
// goroutines of the module's own (the provider may run threads of its own
// inside libfabric).
package ofi
