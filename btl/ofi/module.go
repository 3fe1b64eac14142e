//go:build cgo && ofi

package ofi

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gorun/gorun/btl"
)

func init() { btl.Register("ofi", component{}) }

type component struct{}

// Sizes of the module's buffers (doc.go, "Messages").
const (
	// fragSize is a message's largest size: a receive buffer's. 16 KiB is
	// what libfabric's rxm layer sends eagerly by default (its
	// FI_OFI_RXM_BUFFER_SIZE), so every message of the module is one
	// eager message of the provider, with no rendezvous of rxm's own
	// beneath it.
	fragSize = 16 << 10
	// nRecv receive buffers are posted at all times (2 MiB); nSend send
	// buffers bound what is in flight (2 MiB).
	nRecv = 128
	nSend = 128
	// nRMA bounds the RDMA reads and writes in flight.
	nRMA = 64
)

// Eager limits: the largest message p2p sends without a rendezvous.
// On RDMA hardware it is what one message carries (16 KiB less the
// header): above it, an RDMA read into the user's buffer beats copying
// fragments in and out. On libfabric's tcp provider an RDMA read costs
// round trips through both ranks' progress (measured here: a 16 KiB
// message took 93 µs by RDMA read, 20 µs eagerly in one message), so
// messages up to 64 KiB go eagerly in fragments, as btl/tcp's do.
const (
	eagerLimitRDMA = fragSize - firstLen
	eagerLimitTCP  = 64 << 10
)

// Exclusivity: a provider on RDMA hardware wins over btl/tcp between
// hosts; libfabric's own tcp provider does not (doc.go, "Provider and selection").
const (
	exclusivityRDMA = btl.ExclusivityTCP + 1<<4
	exclusivityTCP  = btl.ExclusivityTCP - 1
)

// ErrNoLibfabric is Open's error when libfabric cannot be loaded.
var ErrNoLibfabric = errors.New("ofi: libfabric not loadable")

// ErrNoProvider is Open's error when no provider offers what the module
// needs, or only libfabric's tcp provider does and nothing asked for it.
var ErrNoProvider = errors.New("ofi: no suitable libfabric provider")

// ErrPeerFailed wraps what ended the traffic with a peer.
var ErrPeerFailed = errors.New("ofi: peer failed")

func (component) Open(env btl.Env) (btl.Module, error) {
	m, err := open(env)
	if err != nil && (pVerbose() > 0 || namedInBTL() || pProvider() != "") {
		fmt.Fprintf(os.Stderr, "gorun: ofi: rank %d: transport absent: %v\n", env.Rank, err)
	}
	return m, err
}

// namedInBTL reports whether GORUN_BTL is a list that names ofi.
func namedInBTL() bool {
	f, err := btl.ParseFilter(btl.Enabled())
	return err == nil && f.Names("ofi")
}

// providerScore ranks providers by their core (the part before ";"):
// RDMA hardware first, libfabric's sockets-based providers last, and
// those that cannot reach another host (shm) or are utility layers alone
// never, unless named by GORUN_OFI_PROVIDER.
func providerScore(prov string) int {
	core, _, _ := strings.Cut(prov, ";")
	switch core {
	case "cxi", "efa", "opx", "psm3", "psm2":
		return 4
	case "verbs", "usnic":
		return 3
	case "tcp", "net":
		return 1
	case "sockets":
		return 0
	}
	return -1 // shm, sm2, udp, ofi_rxd, ucx, ...
}

// ipBased: the provider's addresses are IP socket addresses, so it binds
// to the rank's BindAddr, as btl/tcp does.
func ipBased(prov string) bool {
	core, _, _ := strings.Cut(prov, ";")
	return core == "tcp" || core == "net" || core == "sockets" || core == "verbs"
}

func open(env btl.Env) (*module, error) {
	if err := load(); err != nil {
		return nil, err
	}
	forced := pProvider()
	cands, free, err := getinfo(forced, "")
	if err != nil {
		return nil, fmt.Errorf("%w (provider %q): %v", ErrNoProvider, forced, err)
	}
	best := -1
	for i, c := range cands {
		s := providerScore(c.prov)
		if forced == "" && s < 0 {
			continue
		}
		if best < 0 || s > providerScore(cands[best].prov) {
			best = i
		}
	}
	if best < 0 {
		var seen []string
		for _, c := range cands {
			seen = append(seen, c.prov)
		}
		free()
		return nil, fmt.Errorf("%w: offered %v", ErrNoProvider, slices.Compact(seen))
	}
	c := cands[best]
	score := providerScore(c.prov)
	if forced == "" && score <= 1 && !namedInBTL() {
		free()
		return nil, fmt.Errorf("%w: only libfabric's %q here, and btl/tcp carries TCP traffic (GORUN_BTL=ofi,... or GORUN_OFI_PROVIDER selects it)", ErrNoProvider, c.prov)
	}
	if ipBased(c.prov) {
		node := env.BindAddr
		if node == "" {
			node = "127.0.0.1"
		}
		bound, freeBound, err := getinfo(c.prov, node)
		switch {
		case err == nil && len(bound) > 0:
			free()
			c, free = bound[0], freeBound
		case score <= 1:
			free()
			return nil, fmt.Errorf("%w: %s on %s: %v", ErrNoProvider, c.prov, node, err)
		default:
			freeBound() // RDMA device without that IP: unbound
		}
	}
	f, err := openFabric(c, nRecv, nSend, fragSize, nRecv+nSend+nRMA)
	free()
	if err != nil {
		return nil, fmt.Errorf("ofi: open %s on %s: %w", c.prov, c.fabric, err)
	}
	name, err := f.name()
	if err != nil {
		f.close()
		return nil, fmt.Errorf("ofi: %s: %w", c.prov, err)
	}
	m := &module{
		env:    env,
		f:      f,
		prov:   c.prov,
		fabric: c.fabric,
		cookie: jobCookie(env.Secret, env.JobID),
		peers:  make([]*peer, env.Size),
		probe:  pProbe(),
		tx:     make([]txSlot, nSend),
		rma:    make([]*rmaReq, nRMA),
	}
	m.excl, m.eager = exclusivityTCP, eagerLimitTCP
	if score > 1 {
		m.excl, m.eager = exclusivityRDMA, eagerLimitRDMA
	}
	if m.probe <= 0 {
		m.probe = defaultProbe
	}
	if m.connTimeout = pConnectTimeout(); m.connTimeout <= 0 {
		m.connTimeout = defaultConnectTimeout
	}
	m.card = card{prov: c.prov, fabric: c.fabric, addr: name}.encode()
	m.cache = newRegCache(pMRCache(), m.releaseMR)
	for i := nSend - 1; i >= 0; i-- {
		m.txFree = append(m.txFree, i)
	}
	for i := nRMA - 1; i >= 0; i-- {
		m.rmaFree = append(m.rmaFree, i)
	}
	for i := range nRecv {
		if r := f.postRecv(i); r != 0 {
			f.close()
			return nil, fmt.Errorf("ofi: %s: post receive: %s", c.prov, errText(r))
		}
	}
	if pVerbose() > 0 {
		fmt.Fprintf(os.Stderr, "gorun: ofi: rank %d: libfabric %s, provider %s, fabric %s, domain %s, wait fd %v, FI_HMEM %v, inject %d, max message %d\n",
			env.Rank, libVersion(), c.prov, c.fabric, c.domain, f.hasWaitFD(), c.caps&fiHMEM != 0, f.inject, f.maxMsg)
	}
	return m, nil
}

// module is one opened ofi transport: one endpoint, one completion queue.
type module struct {
	env    btl.Env
	f      *fabric
	prov   string
	fabric string
	card   []byte
	cookie uint64
	excl   int
	eager  int
	probe  time.Duration
	// connTimeout: how long a peer may stay unreachable (connectTimeout).
	connTimeout time.Duration

	peers  []*peer // by rank; nil until reached
	known  []*peer // reached peers, for the probe scan
	busy   []*peer // peers with frames queued behind full send buffers
	tx     []txSlot
	txFree []int
	rma    []*rmaReq // by RMA context slot
	// rmaFree are free RMA context slots; rmaQueue the operations waiting
	// for one (or for the provider's queue).
	rmaFree  []int
	rmaQueue []*rmaReq
	repost   []int // receive buffers to post again
	cache    *regCache[regVal]
	nextKey  uint64 // requested keys, for providers without FI_MR_PROV_KEY
	evs      [32]event
	ticks    int
	closed   bool
	// strangers counts messages dropped for a wrong cookie.
	strangers int
}

var (
	_ btl.Module = (*module)(nil)
	_ btl.Waiter = (*module)(nil)
	_ btl.RMA    = (*module)(nil)
)

func (m *module) Name() string    { return "ofi" }
func (m *module) Address() []byte { return m.card }
func (m *module) Caps() btl.Caps {
	return btl.Caps{EagerLimit: m.eager, MaxFrag: fragSize - fixedLen, Exclusivity: m.excl}
}

func (m *module) String() string { return fmt.Sprintf("ofi(%s) rank %d", m.prov, m.env.Rank) }

// Reach inserts the peer's address into the address vector. A peer whose
// card names another provider or fabric is not reachable by this module.
func (m *module) Reach(p btl.Peer) (btl.Endpoint, error) {
	if m.closed {
		return nil, btl.ErrClosed
	}
	a, ok := p.Addrs["ofi"]
	if !ok || len(a) == 0 {
		return nil, nil
	}
	if p.Rank < 0 || p.Rank >= len(m.peers) {
		return nil, fmt.Errorf("ofi: rank %d outside a job of %d", p.Rank, len(m.peers))
	}
	pe := m.peers[p.Rank]
	if pe != nil && pe.reached {
		return pe, nil
	}
	c, err := decodeCard(a)
	if err != nil {
		return nil, fmt.Errorf("ofi: rank %d: %w", p.Rank, err)
	}
	if c.prov != m.prov || c.fabric != m.fabric {
		return nil, nil
	}
	if pe == nil {
		pe = m.addPeer(p.Rank)
	}
	if err := pe.setAddr(c.addr); err != nil {
		return nil, fmt.Errorf("ofi: rank %d: %w", p.Rank, err)
	}
	return pe, nil
}

// addPeer makes the module's state for rank, until then unknown.
func (m *module) addPeer(rank int) *peer {
	p := &peer{m: m, rank: rank, heard: time.Now()}
	m.peers[rank] = p
	m.known = append(m.known, p)
	return p
}

func (m *module) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	m.f.closeEndpoint() // nothing in flight touches memory after this
	for _, p := range m.known {
		p.failAll(btl.ErrClosed)
	}
	for i := range m.tx {
		if s := &m.tx[i]; s.frame != nil {
			s.frame.fragDone(btl.ErrClosed)
			s.frame = nil
		}
	}
	for i, r := range m.rma {
		if r != nil {
			r.finish(btl.ErrClosed)
			m.rma[i] = nil
		}
	}
	for _, r := range m.rmaQueue {
		r.finish(btl.ErrClosed)
	}
	m.rmaQueue = nil
	m.cache.clear()
	m.f.close()
	return nil
}
