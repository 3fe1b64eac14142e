package p2p

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/params"
)

// kind is the frame type.
type kind uint8

const (
	kEager kind = 1 + iota // header + the whole message
	kRTS                   // request to send: length, sender's request id
	kCTS                   // clear to send: accepted length, both request ids
	kData                  // the message body of a rendezvous, for rreq
	kFinS                  // RMA: the sender's Put of its part is done (for rreq)
	kFinR                  // RMA: the receiver's Get of its part is done (for sreq), or refused (fResend)
)

// fRMA flags an RTS or CTS of an RMA rendezvous; its payload is the
// sender's (RTS) or receiver's (CTS) registered buffer as a btl.Region
// encoding (at most btl.MaxRegionSize bytes).
const fRMA = 1

// fNoPath flags a CTS by which the receiver refuses a message that no path
// it has can carry (device memory on either side, no RMA for it, no staging
// path yet): both sides fail with ErrNoDevicePath instead of waiting.
const fNoPath = 2

// fDevice flags an RTS whose sender's buffer is device memory that it
// could not offer by RMA (no module reaches it, or registering failed):
// the receiver answers fNoPath, so that neither side waits for the other.
const fDevice = 4

// fFail also flags a staged DATA (the sender's copy failed: no more chunks)
// and an empty EAGER whose sender could not copy its device memory to host
// memory (stage.go): the receive that gets it fails.
//
// fFail flags a FIN by which a side of an RMA rendezvous says its part
// failed (its Get or Put ended in error, or was refused where a buffer
// is device memory): the other side fails too, instead of taking the
// message as complete. Each side of an RMA rendezvous sends exactly one
// FIN, failed or not, and completes on the other's, so that neither waits
// for nothing and neither's buffer is written after it was given back;
// except after a receiver's FIN with fResend, on which the receiver's
// part comes as DATA: the receiver's part is over when it lands, the
// sender's view of it when that frame is done (rma.go).
const fFail = 8

// fRevoked flags a CTS by which the receiver refuses a message because its
// communicator was revoked there (revoke.go): the send fails with
// ErrRevoked.
const fRevoked = 16

// fResend flags a receiver's FIN by which it says that its part of an
// RMA rendezvous was refused (btl.ErrRMARefused) and not copied: the
// sender sends that part as DATA instead (rma.go, "Refused parts go by
// frames"), and the receiver's part is over when it lands.
const fResend = 128

// fPutAll and fGetAll flag an RMA CTS by which the receiver says who
// copies the message: the sender all of it (fPutAll), the receiver all of
// it (fGetAll), or neither flag: the receiver the first part and the
// sender the rest (split). The receiver alone decides, so that both sides
// agree whatever each one's GORUN_P2P_DEVICE_SPLIT says.
const (
	fPutAll = 32
	fGetAll = 64
)

// splitMin is the length from which an RMA rendezvous splits the copy: the
// receiver gets the first part while the sender puts the second (docs/measurements.md:
// the split single copy reached 33 GB/s at 1 MB against 12 GB/s for memcpy
// at 4 MB). Below it the receiver gets it all.
const splitMin = 256 << 10

// split returns where the receiver's part of an accepted length ends (the
// receiver's choice; the CTS tells the sender, ctsFlags and sendPart).
// Between two device buffers (dev) the sender copies it all by default
// (GORUN_P2P_DEVICE_SPLIT): two copy engines on one link, one writing and
// one reading, moved 0.54-0.87x the bytes of one writing wherever several
// transfers ran at once (a ring step, a chain), on 4 H100 over NVSwitch;
// only a lone transfer between two GPUs gained from the split (5-12% from
// 1 to 32 MiB) (docs/measurements.md, "Who copies between two GPUs").
func split(accept int, dev bool) int {
	mode := ""
	if dev {
		mode = deviceSplit()
	}
	return splitBy(accept, mode)
}

// splitBy is split with the device mode given ("" for host memory).
func splitBy(accept int, mode string) int {
	switch mode {
	case "":
	case "get":
		return accept
	case "half": // as host memory, below
	default: // put
		return 0
	}
	if accept < splitMin {
		return accept
	}
	return half(accept)
}

// half is where the receiver's part of a split copy ends.
func half(accept int) int { return accept - accept/2 }

// ctsFlags tells the sender the receiver's part m of accept bytes.
func ctsFlags(m, accept int) uint8 {
	switch m {
	case 0:
		return fPutAll
	case accept:
		return fGetAll
	}
	return 0
}

// sendPart returns where the sender's part of accept bytes begins, as the
// receiver's CTS flags say.
func sendPart(flags uint8, accept int) int {
	switch {
	case flags&fPutAll != 0:
		return 0
	case flags&fGetAll != 0:
		return accept
	}
	return half(accept)
}

var (
	pDeviceSplit = params.String("GORUN_P2P_DEVICE_SPLIT", "put",
		"who copies a rendezvous between two device buffers: put (the sender, all of it), get (the receiver, all of it), half (the receiver the first half while the sender puts the rest, as for host memory: faster for one transfer alone between two GPUs, slower when transfers share links, as in collectives)")
	deviceSplit = sync.OnceValue(func() string {
		v := pDeviceSplit()
		switch v {
		case "put", "get", "half":
			return v
		}
		fmt.Fprintf(os.Stderr, "gorun: ignoring GORUN_P2P_DEVICE_SPLIT=%q: not one of put, get, half\n", v)
		return "put"
	})
)

// header is p2p's frame header, encoded into the 48-byte btl.Header:
//
//	0 kind | 1 flags | 2-3 unused | 4-7 context | 8-11 tag | 12-19 length
//	20-23 unused | 24-31 sreq | 32-39 rreq | 40-47 unused
//
// Tag is the user's; length is the message length (EAGER, RTS) or the
// accepted length (CTS, DATA). The sender is the transport's to tell
// (Begin's src). The fields an EAGER frame sets come first, so that its
// header is 13 or 14 significant bytes (btl/sm's records carry no
// trailing zeros): with the ring's 16 bytes a message of up to 34 bytes
// is one cache line.
type header struct {
	kind   kind
	flags  uint8
	ctx    uint32
	tag    int32
	length uint64
	sreq   uint64
	rreq   uint64
}

func (h *header) encode(b *btl.Header) {
	b[0] = byte(h.kind)
	b[1] = h.flags
	binary.LittleEndian.PutUint32(b[4:], h.ctx)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.tag))
	binary.LittleEndian.PutUint64(b[12:], h.length)
	binary.LittleEndian.PutUint64(b[24:], h.sreq)
	binary.LittleEndian.PutUint64(b[32:], h.rreq)
}

func (h *header) decode(b *btl.Header) {
	h.kind = kind(b[0])
	h.flags = b[1]
	h.ctx = binary.LittleEndian.Uint32(b[4:])
	h.tag = int32(binary.LittleEndian.Uint32(b[8:]))
	h.length = binary.LittleEndian.Uint64(b[12:])
	h.sreq = binary.LittleEndian.Uint64(b[24:])
	h.rreq = binary.LittleEndian.Uint64(b[32:])
}
