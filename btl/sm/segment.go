package sm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/internal/shmseg"
	"golang.org/x/sys/unix"
)

// segName is the file of rank's receive segment in job, in shmseg.Dir,
// where the launcher removes gorun-<job>-* after any ending
// (launcher.RemoveSegments).
func segName(job string, rank int) string {
	return filepath.Join(shmseg.Dir, "gorun-"+job+"-sm-"+strconv.Itoa(rank))
}

// segment is one rank's receive segment as seen by one module: the owner's
// own, or a peer's that this module opened. The file descriptor stays open
// until Close, so rings can still be mapped after the file is unlinked.
type segment struct {
	path     string
	fd       int
	ctl      []byte // the control area, mapped
	size     int    // world size
	slots    int
	frag     int
	ringBase int64
	ringSize int
	pid      int
	addr     uint64 // the header's address in the owner's memory
}

// create makes this rank's receive segment: a sparse file of the control
// area and one ring per possible sender, mode 0600, created exclusively (a
// leftover of the same name means something else claims this rank).
func create(path string, size, slots, frag int) (*segment, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	s := &segment{path: path, fd: fd, size: size, slots: slots, frag: frag,
		ringBase: int64(ctlBytes(size)), ringSize: ringBytes(slots, frag), pid: os.Getpid()}
	fail := func(what string, err error) (*segment, error) {
		s.close()
		unix.Unlink(path)
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	total := s.ringBase + int64(size)*int64(s.ringSize)
	if err := unix.Ftruncate(fd, total); err != nil {
		return fail("size", err)
	}
	// Back the control area now; each ring is backed by its sender when it
	// attaches (outRing), so that a full /dev/shm is an error there and not
	// a SIGBUS on first touch.
	if err := unix.Fallocate(fd, 0, 0, s.ringBase); err != nil {
		return fail("allocate", err)
	}
	if s.ctl, err = unix.Mmap(fd, 0, int(s.ringBase), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("map", err)
	}
	c := s.ctl
	s.addr = uint64(uintptr(unsafe.Pointer(&c[0])))
	binary.LittleEndian.PutUint32(c[offVersion:], layoutVersion)
	binary.LittleEndian.PutUint32(c[offSize:], uint32(size))
	binary.LittleEndian.PutUint32(c[offSlots:], uint32(slots))
	binary.LittleEndian.PutUint32(c[offFrag:], uint32(frag))
	binary.LittleEndian.PutUint64(c[offRingBase:], uint64(s.ringBase))
	binary.LittleEndian.PutUint64(c[offRingSize:], uint64(s.ringSize))
	binary.LittleEndian.PutUint32(c[offPID:], uint32(s.pid))
	binary.LittleEndian.PutUint64(c[offAddr:], s.addr)
	atomic.StoreUint64(u64(c, offMagic), segMagic)
	return s, nil
}

var errNotOurs = errors.New("not a segment of this job's user")

// attach opens a peer's segment and maps its control area. A file that is
// missing, foreign (another owner, other permissions) or of another layout
// is refused.
func attach(path string, size int) (*segment, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	s := &segment{path: path, fd: fd}
	fail := func(err error) (*segment, error) {
		s.close()
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o077 != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fail(errNotOurs)
	}
	var h [lineSize]byte
	if n, err := unix.Pread(fd, h[:], 0); err != nil || n != len(h) {
		return fail(fmt.Errorf("read header: %d bytes, %v", n, err))
	}
	le := binary.LittleEndian
	if le.Uint64(h[offMagic:]) != segMagic || le.Uint32(h[offVersion:]) != layoutVersion {
		return fail(fmt.Errorf("not an sm segment of layout %d", layoutVersion))
	}
	s.size = int(le.Uint32(h[offSize:]))
	s.slots = int(le.Uint32(h[offSlots:]))
	s.frag = int(le.Uint32(h[offFrag:]))
	s.ringBase = int64(le.Uint64(h[offRingBase:]))
	s.ringSize = int(le.Uint64(h[offRingSize:]))
	s.pid = int(le.Uint32(h[offPID:]))
	s.addr = le.Uint64(h[offAddr:])
	switch {
	case s.size != size:
		return fail(fmt.Errorf("segment for %d ranks, job has %d", s.size, size))
	// The bounds are the tunables' (checkSlots, checkFrag): beyond them
	// the ring size overflows int (2^31 slots of 2^32-64 bytes came out
	// negative and passed; FuzzAttach).
	case checkSlots(s.slots) != nil || checkFrag(s.frag) != nil ||
		s.ringBase != int64(ctlBytes(size)) || s.ringSize != ringBytes(s.slots, s.frag):
		return fail(fmt.Errorf("inconsistent geometry: %d slots of %d bytes", s.slots, s.frag))
	case st.Size < s.ringBase+int64(size)*int64(s.ringSize):
		return fail(fmt.Errorf("truncated: %d bytes", st.Size))
	}
	if s.ctl, err = unix.Mmap(fd, 0, int(s.ringBase), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail(err)
	}
	return s, nil
}

// ringOff is the file offset of the ring that sender writes into.
func (s *segment) ringOff(sender int) int64 { return s.ringBase + int64(sender)*int64(s.ringSize) }

// mapRing maps the ring of sender. back (the sender) allocates and zeroes
// its memory (shmseg.Back: no lock on the file, so that several senders
// reaching one rank at once do not take turns); without it (the owner
// adopting the ring) the sender's pages are mapped now (MAP_POPULATE).
func (s *segment) mapRing(sender int, back bool) ([]byte, error) {
	off := s.ringOff(sender)
	flags := unix.MAP_SHARED
	if !back {
		flags |= unix.MAP_POPULATE
	}
	b, err := unix.Mmap(s.fd, off, s.ringSize, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("map ring in %s: %w", s.path, err)
	}
	if back {
		if err := shmseg.Back(s.fd, b, off); err != nil {
			unix.Munmap(b)
			return nil, fmt.Errorf("allocate ring in %s: %w", s.path, err)
		}
	}
	return b, nil
}

func (s *segment) close() {
	if s.ctl != nil {
		unix.Munmap(s.ctl)
		s.ctl = nil
	}
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// validJob reports whether a job id can be part of a file name.
func validJob(job string) bool {
	return job != "" && !strings.ContainsAny(job, "/\x00") && job != "." && job != ".."
}
