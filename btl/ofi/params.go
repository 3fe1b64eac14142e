package ofi

import (
	"time"

	"github.com/gorun/gorun/internal/params"
)

// The tunables are declared whether or not the transport is built (tag
// ofi), so that gorun --help-params lists them everywhere.
var (
	pProvider = params.String("GORUN_OFI_PROVIDER", "",
		`libfabric provider to use, as fi_info names it ("verbs;ofi_rxm", "efa", "cxi", "tcp;ofi_rxm"); empty: the best offered. Naming one also opens the tcp provider, which is otherwise left to btl/tcp`)
	pLib = params.String("GORUN_OFI_LIB", "libfabric.so.1",
		"the libfabric library the ofi transport loads at run time (a path for a vendor's build, e.g. /opt/amazon/efa/lib/libfabric.so.1)")
	pVerbose = params.Int("GORUN_OFI_VERBOSE", 0,
		"1: each rank prints the libfabric provider it chose, or why the ofi transport is absent")
	pMRCache = params.Int("GORUN_OFI_MR_CACHE", defaultMRCache,
		"bytes of memory registrations the ofi transport keeps cached once unused (the registrations pin the memory); 0 keeps none")
	pProbe = params.Duration("GORUN_OFI_PROBE", defaultProbe,
		"how long the ofi transport waits on a silent peer it has business with (a frame half received, frames or RDMA queued) before probing it; a probe that fails reports the peer dead")
	pConnectTimeout = params.Duration("GORUN_OFI_CONNECT_TIMEOUT", defaultConnectTimeout,
		"how long libfabric may refuse every send to a peer (it cannot connect: the peer is gone, or not ours) before the peer is reported failed")
)

// defaultConnectTimeout is btl/tcp's bound on a connection's set-up, for
// the same reasons (btl/tcp/params.go): a live peer connects in well under
// a millisecond on a LAN, a lost SYN costs a second.
const defaultConnectTimeout = 10 * time.Second

// defaultMRCache: 256 MiB of idle registrations. OSU's bw and latency
// reuse one buffer per size, so a cache of a few entries already hits on
// every iteration; the bound is for applications that register many
// buffers, whose memory the cache keeps alive (pinned) while cached.
const defaultMRCache = 256 << 20

// defaultProbe: 300 ms. A peer's death shows as a failed send, and the
// module sends nothing to a peer it only receives from; probing a silent
// peer a few times a second costs nothing measurable and finds a killed
// peer well inside the membership's own detection (about 0.5 s).
const defaultProbe = 300 * time.Millisecond
