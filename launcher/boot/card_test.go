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

func TestForeignLauncher(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		who  string
		size int
	}{
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1"}, "Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=4)", 4},
		{map[string]string{"PMI_SIZE": "2", "PMI_RANK": "0"}, "PMI launcher", 2},
		{map[string]string{"PMIX_RANK": "0", "PMIX_SIZE": "8"}, "PMIx", 8},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "2"}, "srun (SLURM_STEP_NUM_TASKS=3)", 3},
		{map[string]string{"SLURM_NTASKS": "3", "SLURM_JOB_ID": "7"}, "", 0}, // a batch script, not a step
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "x"}, "", 0},
		{nil, "", 0},
	} {
		who, n := ForeignLauncher(func(k string) string { return c.env[k] })
		if n != c.size || (c.who == "") != (who == "") || !strings.Contains(who, c.who) {
			t.Errorf("%v: %q, %d; want %q, %d", c.env, who, n, c.who, c.size)
		}
	}
}
