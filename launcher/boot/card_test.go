package boot

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

// bigCard is as large a card as a job makes: the largest rank and pid, a
// host id as long as a Linux host name may be, every built-in transport's
// longest address (tcp on IPv6, sm's segment path, cuda's marker), 8 GPUs
// and 2 NICs of the longest interface names.
func bigCard() Card {
	gpus := make([]string, 8)
	for i := range gpus {
		gpus[i] = fmt.Sprintf("0000:%02x:00.0", 0x18+0x10*i)
	}
	return Card{
		Rank:   1<<20 - 1,
		PID:    1<<22 - 1, // the largest pid_max
		HostID: strings.Repeat("h", 64),
		Addrs: map[string][]byte{
			"tcp":  []byte("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
			"sm":   []byte("/dev/shm/gorun-0123456789ab-sm-1048575"),
			"cuda": []byte("ipc"),
		},
		Placement: Placement{
			LocalRank: 255, LocalSize: 256, NUMA: 7,
			GPUs: gpus,
			NICs: []string{"enp202s0f0np0xx", "enp202s0f1np1xx"},
		},
	}
}

func TestCardFitsNodeMeta(t *testing.T) {
	c := bigCard()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("largest card: %d bytes of memberlist's %d", len(b), memberlist.MetaMaxSize)
	if len(b) > memberlist.MetaMaxSize {
		t.Fatalf("a card with 8 GPUs and 2 NICs encodes to %d bytes, more than memberlist's %d", len(b), memberlist.MetaMaxSize)
	}
	got, err := DecodeCard(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("card round trip:\n got %+v\nwant %+v", got, c)
	}
}

// TestCardUnknownPlacement: a card without GPUs or NICs round-trips with
// NUMA -1 (not the zero value, node 0).
func TestCardUnknownPlacement(t *testing.T) {
	c := Card{Rank: 3, PID: 42, HostID: "h", Addrs: map[string][]byte{"tcp": []byte("127.0.0.1:1")},
		Placement: Placement{LocalRank: 1, LocalSize: 2, NUMA: -1}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCard(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("card round trip:\n got %+v\nwant %+v", got, c)
	}
}
