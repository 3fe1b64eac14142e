package launcher

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseHostList(t *testing.T) {
	cases := []struct {
		in   string
		want []Host
		err  string
	}{
		{"h1:4,h2:4", []Host{{Name: "h1", Slots: 4}, {Name: "h2", Slots: 4}}, ""},
		{"h1,h2:2,h1:3", []Host{{Name: "h1"}, {Name: "h2", Slots: 2}}, ""},
		{"h1:1,h1:2", []Host{{Name: "h1", Slots: 3}}, ""},
		{"::1", []Host{{Name: "::1"}}, ""},
		{"[fe80::1]:2,10.0.0.1:3", []Host{{Name: "fe80::1", Slots: 2}, {Name: "10.0.0.1", Slots: 3}}, ""},
		{"h1:0", nil, "slots must be a positive number"},
		{"h1:x", nil, "slots must be a positive number"},
		{"h1:", nil, "slots must be a positive number"},
		{"h1,,h2", nil, "empty host name"},
		{":3", nil, "empty host name"},
		{"localhost slots=2", nil, `"localhost slots=2" is not a host name`},
		{"localhost:2:3", nil, `"localhost:2:3": expected host or host:N`},
		{"fe80::1%eth0", []Host{{Name: "fe80::1%eth0"}}, ""},
	}
	for _, c := range cases {
		got, err := ParseHostList(c.in)
		got = noEntries(got)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseHostfile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "hosts")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	got, err := ParseHostfile(write("# cluster\n\nnode1 slots=4 max_slots=8\n  node2   slots=2 # two\nnode3\nnode1 slots=2\nnode4 max-slots=3 count=1\n"))
	want := []Host{{Name: "node1", Slots: 6, MaxSlots: 8}, {Name: "node2", Slots: 2}, {Name: "node3"}, {Name: "node4", Slots: 1, MaxSlots: 3}}
	if err != nil || !reflect.DeepEqual(noEntries(got), want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	// MPICH's host:N is N slots, as with -H (it was once read as an ssh
	// port); a port is port=P; an IPv6 address is bracketed.
	got, err = ParseHostfile(write("localhost:2\nnode5:3 max_slots=4 port=2222\n[fe80::1]:2\n[::1]\nnode6 port=22\n"))
	want = []Host{{Name: "localhost", Slots: 2}, {Name: "node5", Slots: 3, MaxSlots: 4, Port: "2222"}, {Name: "fe80::1", Slots: 2}, {Name: "::1"}, {Name: "node6", Port: "22"}}
	entry := ""
	if len(got) > 1 {
		entry = got[1].Entry
	}
	if err != nil || !reflect.DeepEqual(noEntries(got), want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	if e := entry; e != `hosts:2 "node5:3 max_slots=4 port=2222" (3 slots, max 4, ssh port 2222)` {
		t.Errorf("entry %q", e)
	}
	bad := []struct{ body, want string }{
		{"n1 slots=2\nn2 slots=-1\n", "hosts:2: slots=\"-1\": must be a positive number"},
		{"n1 slots=2 gpus=4\n", "hosts:1: unknown key \"gpus\""},
		{"\n\nn1 4\n", "hosts:3: \"4\" is not key=value"},
		{"slots=4\n", "hosts:1: expected a host name first"},
		{"n1 slots=3 max_slots=2\n", "hosts:1: slots=3 exceeds max_slots=2"},
		{"# empty\n", "no hosts"},
		{"n1:0\n", "hosts:1: \"n1:0\": slots must be a positive number"},
		{"n1:22 slots=2\n", "hosts:1: slots given twice"},
		{"n1 slots=2 slots=3\n", "hosts:1: slots given twice (slots=2 and slots=3)"},
		{"n1 max_slots=2 max_slots=3\n", "hosts:1: max_slots given twice"},
		{"n1 port=x\n", "hosts:1: port=\"x\": must be a port number"},
		{"[fe80::1\n", "expected [address]"},
	}
	for _, b := range bad {
		_, err := ParseHostfile(write(b.body))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: error %v, want %q", b.body, err, b.want)
		}
	}
	if _, err := ParseHostfile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing hostfile is not an error")
	}
}

// noEntries drops the descriptions for --display-map from hosts.
func noEntries(hosts []Host) []Host {
	for i := range hosts {
		hosts[i].Entry = ""
	}
	return hosts
}

func TestIsLocalHost(t *testing.T) {
	hn, _ := os.Hostname()
	for _, h := range []string{"localhost", "127.0.0.1", "::1", hn} {
		if !isLocalHost(h) {
			t.Errorf("%q is not local", h)
		}
	}
	for _, h := range []string{"node-that-is-not-here", "192.0.2.254"} {
		if isLocalHost(h) {
			t.Errorf("%q is local", h)
		}
	}
}

// TestMergeLocalNames: this host listed under two names is one host whose
// slots add up, and a rankfile's ranks on either name land on it.
func TestMergeLocalNames(t *testing.T) {
	hn, err := os.Hostname()
	if err != nil || isLocalHost("gorun-test-elsewhere") {
		t.Skipf("no host name (%v)", err)
	}
	hosts := []Host{{Name: "localhost", Slots: 2}, {Name: "gorun-test-elsewhere", Slots: 1}, {Name: hn, Slots: 3}}
	rf := []RankSlot{{Rank: 0, Host: hn}, {Rank: 1, Host: "localhost"}, {Rank: 2, Host: "gorun-test-elsewhere"}}
	got, grf := mergeLocalNames(hosts, rf)
	if len(got) != 2 || got[0].Name != "localhost" || got[0].Slots != 5 || got[1].Name != "gorun-test-elsewhere" {
		t.Fatalf("hosts %+v", got)
	}
	if grf[0].Host != "localhost" || grf[1].Host != "localhost" || grf[2].Host != "gorun-test-elsewhere" || rf[0].Host != hn {
		t.Fatalf("rankfile %+v (the caller's %+v)", grf, rf)
	}
	if got, _ := mergeLocalNames(hosts[:2], nil); len(got) != 2 {
		t.Fatalf("no alias: %+v", got)
	}
	// Caps add up (each name's is a share of the machine); one name
	// without a cap lifts it.
	capped := []Host{{Name: "localhost", Slots: 2, MaxSlots: 2}, {Name: hn, Slots: 2, MaxSlots: 3}}
	if got, _ := mergeLocalNames(capped, nil); len(got) != 1 || got[0].Slots != 4 || got[0].MaxSlots != 5 {
		t.Fatalf("capped: %+v", got)
	}
	capped[1].MaxSlots = 0
	if got, _ := mergeLocalNames(capped, nil); got[0].MaxSlots != 0 {
		t.Fatalf("one uncapped: %+v", got)
	}
	// The rankfile names this host otherwise than the list.
	if _, grf := mergeLocalNames(hosts[:1], rf[:2]); grf[0].Host != "localhost" || grf[1].Host != "localhost" {
		t.Fatalf("rankfile alias only: %+v", grf)
	}
}
