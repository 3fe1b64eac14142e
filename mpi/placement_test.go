package mpi

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/launcher"
	"github.com/gorun/gorun/launcher/boot"
	"golang.org/x/sys/unix"
)

// placementChild marks this test binary re-executed as a rank of
// TestPlacementReachesTransports's job.
const placementChild = "MPI_TEST_PLACEMENT_CHILD"

// What Init handed the transports, recorded by the hook in a child. The
// hook is set from init because the package's TestMain (example_test.go)
// calls Init before any test runs.
var (
	seenEnv   btl.Env
	seenPeers []btl.Peer
)

func init() {
	if os.Getenv(placementChild) != "" {
		testHookTransports = func(own btl.Env, peers []btl.Peer) {
			seenEnv, seenPeers = own, append([]btl.Peer(nil), peers...)
		}
	}
}

// TestPlacementReachesTransports launches this test binary as 3 ranks
// bound to one core each (launcher.Run, as gorun --bind-to core does) and
// checks, in every rank, the placement Init gave the transports: its own
// in btl.Env (local rank and size, the NUMA node of its core, the loopback
// NIC of a local job) and every peer's in btl.Peer, carried by the
// business cards.
func TestPlacementReachesTransports(t *testing.T) {
	if os.Getenv(placementChild) != "" {
		if err := checkPlacement(); err != nil {
			t.Fatalf("rank %s: %v", os.Getenv("GORUN_RANK"), err)
		}
		return
	}
	if testing.Short() {
		t.Skip("launches ranks")
	}
	const np = 3
	var out, errb bytes.Buffer
	code, err := launcher.Run(launcher.Spec{
		NP:      np,
		Program: os.Args[0],
		Args:    []string{"-test.run=^TestPlacementReachesTransports$", "-test.v"},
		Env:     []string{placementChild + "=1"},
		BindTo:  launcher.BindCore,
		Timeout: 60 * time.Second,
		Stdout:  &out,
		Stderr:  &errb,
	})
	if code != 0 || err != nil {
		t.Fatalf("job exited %d (%v)\nstdout:\n%s\nstderr:\n%s", code, err, out.String(), errb.String())
	}
	if n := strings.Count(out.String(), "--- PASS: TestPlacementReachesTransports"); n != np {
		t.Fatalf("%d of %d ranks passed\nstdout:\n%s\nstderr:\n%s", n, np, out.String(), errb.String())
	}
}

// checkPlacement is a rank's side of TestPlacementReachesTransports.
func checkPlacement() error {
	s := live.Load()
	if s == nil {
		return fmt.Errorf("Init did not run")
	}
	own, peers := seenEnv, seenPeers
	if own.Size != s.env.Size || len(peers) != own.Size {
		return fmt.Errorf("hook saw size %d and %d peers, world is %d", own.Size, len(peers), s.env.Size)
	}
	// One host, ranks mapped by slot: local rank = rank.
	if own.LocalRank != own.Rank || own.LocalSize != own.Size {
		return fmt.Errorf("btl.Env placement %+v: local rank %d of %d, want %d of %d", own.Placement, own.LocalRank, own.LocalSize, own.Rank, own.Size)
	}
	if want := numaOfBoundCPU(); own.NUMA != want {
		return fmt.Errorf("btl.Env placement %+v: NUMA %d, want %d (the node of the core the rank is bound to)", own.Placement, own.NUMA, want)
	}
	if len(own.NICs) != 1 {
		return fmt.Errorf("btl.Env placement %+v: want the one NIC of 127.0.0.1", own.Placement)
	}
	if ifc, err := net.InterfaceByName(own.NICs[0]); err != nil || ifc.Flags&net.FlagLoopback == 0 {
		return fmt.Errorf("btl.Env placement %+v: %s is not the loopback interface (%v)", own.Placement, own.NICs[0], err)
	}
	for i, p := range peers {
		if p.Rank != i || p.LocalRank != i || p.LocalSize != own.Size || p.HostID != own.HostID {
			return fmt.Errorf("btl.Peer %d: %+v", i, p)
		}
	}
	// Our own card came back through the launcher unchanged.
	if !reflect.DeepEqual(peers[own.Rank].Placement, own.Placement) {
		return fmt.Errorf("own placement %+v came back in the roster as %+v", own.Placement, peers[own.Rank].Placement)
	}
	return nil
}

// numaOfBoundCPU is the NUMA node of the one CPU this process may run on,
// from the CPU's sysfs directory (not the node's cpulist that boot reads),
// or -1 without NUMA information.
func numaOfBoundCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != 1 {
		return -2 // not bound to one CPU: fails the check
	}
	cpu := 0
	for !set.IsSet(cpu) {
		cpu++
	}
	m, _ := filepath.Glob(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/node[0-9]*", cpu))
	if len(m) != 1 {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m[0]), "node"))
	if err != nil {
		return -1
	}
	return n
}

// TestOwnGPUs: the ranks of a host see GPUs of their own when every one
// lists some and no two list the same one; other hosts' ranks do not
// count, and an unknown list (empty) makes it false.
func TestOwnGPUs(t *testing.T) {
	card := func(host string, gpus ...string) boot.Card {
		return boot.Card{HostID: host, Placement: boot.Placement{GPUs: gpus}}
	}
	for _, c := range []struct {
		name  string
		cards []boot.Card
		want  bool
	}{
		{"one each", []boot.Card{card("a", "0000:01:00.0"), card("a", "0000:02:00.0")}, true},
		{"two each", []boot.Card{card("a", "0000:01:00.0", "0000:03:00.0"), card("a", "0000:02:00.0", "0000:04:00.0")}, true},
		{"one shared", []boot.Card{card("a", "0000:01:00.0"), card("a", "0000:01:00.0")}, false},
		{"all see all", []boot.Card{card("a", "0000:01:00.0", "0000:02:00.0"), card("a", "0000:01:00.0", "0000:02:00.0")}, false},
		{"one unknown", []boot.Card{card("a", "0000:01:00.0"), card("a")}, false},
		{"other host shares", []boot.Card{card("a", "0000:01:00.0"), card("b", "0000:01:00.0"), card("a", "0000:02:00.0")}, true},
		{"other host unknown", []boot.Card{card("a", "0000:01:00.0"), card("b")}, true},
		{"none here", []boot.Card{card("b", "0000:01:00.0")}, false},
	} {
		if got := ownGPUs(c.cards, "a"); got != c.want {
			t.Errorf("%s: ownGPUs = %v, want %v", c.name, got, c.want)
		}
	}
}
