package agentproto

import (
	"bytes"
	"encoding/binary"
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
		r := bytes.NewReader(data)
		for {
			m, err := Read(r)
			if err != nil {
				return
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
