package agentproto

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/gorun/gorun/launcher/boot"
)

// FuzzAgentFrame: no byte string read as agent frames may panic the
// decoder (an agent or a launcher reads the other's stream with it); a
// frame it accepts re-encodes to one it reads back alike.
func FuzzAgentFrame(f *testing.F) {
	for _, m := range []*Msg{
		{Kind: "hello", Version: Version, Host: "h1", PID: 7, NCPU: 2, CPUs: []int{0, 1}, Addr: "10.0.0.1", ProgOK: []bool{true, false}},
		{Kind: "setup", JobID: "abc", Secret: bytes.Repeat([]byte{1}, 32)},
		{Kind: "spawn", Rank: 3, Prog: "/bin/true", Args: []string{"a"}, Env: []string{"K=v"}, Dir: "/", Bind: []int{2, 3}, Stdin: true},
		{Kind: "out", Rank: 1, Stream: 2, Data: []byte("partial")},
		{Kind: "ctl", Rank: 1, Ctl: &boot.CtlMsg{Kind: boot.MsgAbort, Code: 3, Text: "x"}},
		{Kind: "exited", Rank: 2, Status: 256},
		{Kind: "signal", Sig: 15},
	} {
		var b bytes.Buffer
		if err := Write(&b, m); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	huge := binary.LittleEndian.AppendUint32(nil, MaxMsg+1)
	f.Add(huge)
	f.Add([]byte{3, 0, 0, 0, 0x81, 0xa1})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The reusing Reader reads what Read reads, no more, no less.
		fr := NewReader(bytes.NewReader(data))
		defer func() {
			if _, err := fr.Read(); err == nil {
				t.Fatalf("the Reader read a frame more than Read")
			}
		}()
		r := bytes.NewReader(data)
		for {
			m, err := Read(r)
			if err != nil {
				return
			}
			if m2, err := fr.Read(); err != nil || m2.Kind != m.Kind || !bytes.Equal(m2.Data, m.Data) {
				t.Fatalf("Read gave %+v, the Reader %+v (%v)", m, m2, err)
			}
			var b bytes.Buffer
			if err := Write(&b, m); err != nil {
				t.Fatalf("re-encode %+v: %v", m, err)
			}
			if _, err := Read(&b); err != nil {
				t.Fatalf("read back %+v: %v", m, err)
			}
		}
	})
}

// TestReaderWriter: frames written by a Writer read back alike through a
// Reader, whose reused Data never carries one frame's bytes into the
// next (a frame without Data reads empty).
func TestReaderWriter(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 100<<10)
	in := []*Msg{
		{Kind: Out, Rank: 1, Stream: Stdout, Data: []byte("abc")},
		{Kind: Out, Rank: 2, Stream: Stderr, Data: big},
		{Kind: Heartbeat},
		{Kind: Out, Rank: 0, Stream: Stdout, Data: []byte("de")},
		{Kind: Stdin},
		{Kind: Exited, Rank: 3, Status: 256},
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, m := range in {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&b)
	for i, want := range in {
		m, err := r.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if m.Kind != want.Kind || m.Rank != want.Rank || m.Stream != want.Stream || m.Status != want.Status || !bytes.Equal(m.Data, want.Data) {
			t.Errorf("frame %d: %s rank %d stream %d status %d, %d bytes; want %+v", i, m.Kind, m.Rank, m.Stream, m.Status, len(m.Data), want)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}
