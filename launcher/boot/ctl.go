package boot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// Control message kinds.
const (
	MsgHello     = "hello"     // launcher -> rank: the job secret
	MsgFinalized = "finalized" // rank -> launcher: Finalize completed
	MsgAbort     = "abort"     // rank -> launcher: end the job with Code
)

// CtlMsg is one message on the control socket (length-prefixed msgpack).
type CtlMsg struct {
	Kind   string `msgpack:"k"`
	Secret []byte `msgpack:"s,omitempty"`
	Code   int    `msgpack:"c,omitempty"`
	Text   string `msgpack:"t,omitempty"`
}

// maxCtlMsg bounds a control message; anything larger is corruption.
const maxCtlMsg = 1 << 20

// WriteFrame writes v as one frame: a 4-byte little-endian length, then
// v in msgpack. The control socket and the launcher's agent connections
// both speak it.
func WriteFrame(w io.Writer, v any) error {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// FrameWriter writes frames as WriteFrame does, each with one Write call,
// encoding into one buffer it keeps: a stream of large frames (the agent
// protocol's output chunks) allocates nothing per frame. It is not safe for
// concurrent use.
type FrameWriter struct {
	w   io.Writer
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewFrameWriter returns a FrameWriter writing to w.
func NewFrameWriter(w io.Writer) *FrameWriter {
	f := &FrameWriter{w: w}
	f.enc = msgpack.NewEncoder(&f.buf)
	return f
}

// Write writes v as one frame.
func (f *FrameWriter) Write(v any) error {
	f.buf.Reset()
	f.buf.Write([]byte{0, 0, 0, 0}) // the length, once known
	if err := f.enc.Encode(v); err != nil {
		return err
	}
	b := f.buf.Bytes()
	binary.LittleEndian.PutUint32(b, uint32(len(b)-4))
	_, err := f.w.Write(b)
	return err
}

// ReadFrame reads one frame written by WriteFrame into v; what names the
// kind of frame in errors, and a frame longer than max is corruption, as
// is one whose msgpack is malformed (checkShape).
func ReadFrame(r io.Reader, v any, what string, max uint32) error {
	return ReadFrameBuf(r, v, what, max, nil)
}

// ReadFrameBuf is ReadFrame reading the frame's bytes into *buf, grown as
// needed and kept for the next frame (buf nil: a new slice). v keeps no
// reference to them: decoding copies.
func ReadFrameBuf(r io.Reader, v any, what string, max uint32, buf *[]byte) error {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(lb[:])
	if n > max {
		return fmt.Errorf("%s of %d bytes", what, n)
	}
	var b []byte
	if buf == nil {
		b = make([]byte, n)
	} else {
		if uint32(cap(*buf)) < n {
			*buf = make([]byte, n)
		}
		b = (*buf)[:n]
	}
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	if err := checkShape(b); err != nil {
		return fmt.Errorf("bad %s: %w", what, err)
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bad %s: %w", what, err)
	}
	return nil
}

// WriteCtl writes one control message to w.
func WriteCtl(w io.Writer, m CtlMsg) error { return WriteFrame(w, &m) }

// ReadCtl reads one control message from r.
func ReadCtl(r io.Reader) (CtlMsg, error) {
	var m CtlMsg
	err := ReadFrame(r, &m, "control message", maxCtlMsg)
	return m, err
}

// CtlPair returns a connected pair of control sockets: the launcher keeps
// the first as a net.Conn and passes the second to the rank as an inherited
// file.
func CtlPair() (net.Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	lf := os.NewFile(uintptr(fds[0]), "gorun-ctl")
	c, err := net.FileConn(lf)
	lf.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "gorun-ctl-rank"), nil
}

type ctlConn struct {
	mu sync.Mutex
	c  net.Conn
}

func openCtl(fd int) (*ctlConn, error) {
	// The socket must not leak into programs this rank starts.
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "gorun-ctl")
	if f == nil {
		return nil, fmt.Errorf("not an open file")
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	return &ctlConn{c: c}, nil
}

func (c *ctlConn) read() (CtlMsg, error) { return ReadCtl(c.c) }

func (c *ctlConn) write(m CtlMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return WriteCtl(c.c, m)
}
