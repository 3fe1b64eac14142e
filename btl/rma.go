package btl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RMA is the optional capability of modules that move bytes between this
// process's memory and a peer's without the peer's CPU copying them:
// process_vm_readv/writev between ranks of one host (sm), RDMA read and
// write on a fabric (ofi), copy engines over CUDA IPC mappings (cuda). p2p
// finds it by type assertion on the module of a route and uses it for the
// rendezvous of large messages (doc.go, "RMA").
//
// Every method is called with the engine lock held, like the rest of a
// Module, and none of them may wait on the network.
type RMA interface {
	// RMAKinds is the set of memory kinds Get and Put can move between
	// this process and peer, at either end; empty when RMA with peer is
	// impossible (another host, refused by the kernel, turned off). p2p
	// asks once, when it makes the route to peer. A module that carries no
	// frames (cuda) learns of its peers here.
	RMAKinds(peer Peer) Kinds
	// Register makes m reachable by peers' Get and Put and fills r: its
	// kind, the address and length by which peers name it, and a key of
	// at most MaxKeySize bytes, all of which travel to the peer (Encode),
	// and the module's own Handle, which does not. Modules cache
	// registrations (registering costs a system call or more on a fabric);
	// every Register is paired with one Deregister, made once the transfer
	// that needed it has completed.
	Register(m Mem, r *Region) error
	// Deregister releases what Register took (or a reference to a cached
	// registration).
	Deregister(r *Region)
	// Get starts copying op.Local.Len() bytes from op.Remote, at
	// op.Offset bytes past its start, into op.Local. Put starts copying
	// op.Local to op.Remote at op.Offset. A nil error means the operation
	// was accepted: op.Owner.RMADone is then called exactly once, with nil
	// once every byte has arrived at its destination or with the error that
	// ended it (the peer died, the address was bad, the module closed).
	// RMADone may come before Get or Put returns (a module that copies
	// synchronously, as sm does) or from a later Progress. A non-nil error
	// means nothing was started and RMADone will not be called. Until
	// RMADone, op, the local memory and both regions stay valid and
	// untouched by the caller.
	Get(op *RMAOp) error
	Put(op *RMAOp) error
}

// RMAOp is one Get or Put, owned by the caller (p2p embeds it in its
// request, so starting one allocates nothing).
type RMAOp struct {
	Peer   int
	Local  Mem
	Remote *Region
	// Offset is where in Remote the transfer starts; Offset plus
	// Local.Len() must not exceed Remote.Len.
	Offset uint64
	Owner  RMACompleter
}

// InRegion reports whether op stays inside its remote region: Offset plus
// Local.Len() at most Remote.Len, without overflow. A region decoded from
// a peer is untrusted; modules check this before touching memory.
func (op *RMAOp) InRegion() bool {
	n := uint64(op.Local.Len())
	return op.Offset <= op.Remote.Len && n <= op.Remote.Len-op.Offset
}

// RMACompleter is told when an RMA operation ends. RMADone is called with
// the engine lock held, from inside Get, Put or Progress; it must not block
// and must not call back into the engine's public API.
type RMACompleter interface {
	RMADone(op *RMAOp, err error)
}

// MaxKeySize bounds a region's key: what a remote peer needs besides the
// address to reach registered memory (an RDMA remote key, a CUDA IPC
// handle: 64 bytes).
const MaxKeySize = 64

// Region is registered memory as a peer names it. The fields up to the key
// travel in p2p's RTS and CTS (Encode, DecodeRegion); Handle stays with the
// module that registered it.
type Region struct {
	Kind MemKind
	// Addr is how Get and Put name the region's first byte: a virtual
	// address (sm, ofi with FI_MR_VIRT_ADDR) or an offset into what the
	// key names (an IPC mapping). Its meaning belongs to the module.
	Addr uint64
	Len  uint64
	// Handle is the registering module's own reference (a cache entry, a
	// memory registration); nil for a region decoded from a peer.
	Handle any

	keyLen uint8
	key    [MaxKeySize]byte
}

// Key returns the region's key (empty for modules that need none).
func (r *Region) Key() []byte { return r.key[:r.keyLen] }

// SetKey sets the key; it fails for keys longer than MaxKeySize.
func (r *Region) SetKey(k []byte) error {
	if len(k) > MaxKeySize {
		return fmt.Errorf("btl: region key of %d bytes exceeds %d", len(k), MaxKeySize)
	}
	r.keyLen = uint8(copy(r.key[:], k))
	return nil
}

// regionFixed is the encoded size of a region without its key:
//
//	0 kind | 1 key length | 2-7 zero | 8-15 addr | 16-23 len | 24.. key
const regionFixed = 24

// MaxRegionSize is the largest encoded region.
const MaxRegionSize = regionFixed + MaxKeySize

// EncodedLen is the length of r's encoding.
func (r *Region) EncodedLen() int { return regionFixed + int(r.keyLen) }

// Encode writes r's travelling fields into b, which must hold
// EncodedLen bytes, and returns the bytes written.
func (r *Region) Encode(b []byte) int {
	b = b[:r.EncodedLen()]
	clear(b[:8])
	b[0] = byte(r.Kind)
	b[1] = r.keyLen
	binary.LittleEndian.PutUint64(b[8:], r.Addr)
	binary.LittleEndian.PutUint64(b[16:], r.Len)
	copy(b[regionFixed:], r.key[:r.keyLen])
	return len(b)
}

// ErrBadRegion is returned by DecodeRegion for bytes that are not a region.
var ErrBadRegion = errors.New("btl: malformed region descriptor")

// DecodeRegion reads a region a peer encoded. It checks everything a
// malicious or corrupt peer could get wrong: the length, the kind, the key
// length, the reserved bytes, and that Addr+Len does not wrap.
func DecodeRegion(b []byte, r *Region) error {
	if len(b) < regionFixed {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrBadRegion, len(b), regionFixed)
	}
	k := MemKind(b[0])
	if k >= numMemKinds {
		return fmt.Errorf("%w: memory kind %d", ErrBadRegion, b[0])
	}
	kl := int(b[1])
	if kl > MaxKeySize || len(b) != regionFixed+kl {
		return fmt.Errorf("%w: key of %d bytes in %d", ErrBadRegion, kl, len(b))
	}
	for _, z := range b[2:8] {
		if z != 0 {
			return fmt.Errorf("%w: reserved bytes set", ErrBadRegion)
		}
	}
	addr := binary.LittleEndian.Uint64(b[8:])
	n := binary.LittleEndian.Uint64(b[16:])
	if addr+n < addr {
		return fmt.Errorf("%w: %#x+%d wraps", ErrBadRegion, addr, n)
	}
	*r = Region{Kind: k, Addr: addr, Len: n, keyLen: uint8(kl)}
	copy(r.key[:], b[regionFixed:])
	return nil
}

// ErrRMARefused is returned by RMA calls the system refuses (the kernel
// forbids process_vm_readv with that peer, a provider cannot register the
// memory), not by those a peer's bad region makes fail. A Get or Put
// refused between two host buffers has p2p send that part by frames
// instead (p2p/rma.go), and ask RMAKinds again for the peer; otherwise
// p2p fails the transfer.
var ErrRMARefused = errors.New("btl: remote memory access refused")
