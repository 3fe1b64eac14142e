package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/p2psoak"
	"github.com/gorun/gorun/mpi"
)

// TestP2PSoak runs a random schedule of point-to-point messages, every
// way of sending and receiving them (wildcards, probes, persistent,
// buffered and synchronous sends, cancelled receives) on three
// communicators at sizes around the transports' limits, with ranks
// falling behind now and then, and checks every message and its order
// (internal/p2psoak; bench/p2psoak runs it for long). Different seeds,
// rank counts and settings: the defaults; btl/sm with a small ring, 4 KiB
// fragments and no single copy (large messages through the ring, in
// fragments); rendezvous from 64 bytes; two pretend hosts (TCP between
// them, shared memory within); TCP only.
func TestP2PSoak(t *testing.T) {
	runSoaks(t, "p2p-soak", 120*time.Second, nil, []soakCase{
		{"np=3", 3, nil},
		{"np=4/fragments", 4, []string{"GORUN_SM_SLOTS=2", "GORUN_SM_FRAG_SIZE=4096", "GORUN_SM_SINGLE_COPY=none"}},
		{"np=2/eager=64", 2, []string{"GORUN_SM_EAGER_LIMIT=64"}},
		{"np=4/two-hosts", 4, []string{"GORUN_FAKE_HOSTS=2"}},
		{"np=3/tcp", 3, []string{"GORUN_BTL=tcp,self"}},
	})
}

// TestGPUP2PSoak is TestP2PSoak with a third of the messages sent from
// device memory and some received into it (a GPU host runs it): CUDA IPC
// within a host, staging through host memory to the other pretend host,
// and device to host and back.
func TestGPUP2PSoak(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	runSoaks(t, "p2p-soak", 300*time.Second, []string{"GORUN_TEST_SOAK_GPU=1"}, gpuSoakCases)
}

func init() { rankCases["p2p-soak"] = caseP2PSoak }

func caseP2PSoak(w *mpi.Comm) error {
	seed, onGPU := soakSetting()
	cfg := p2psoak.Config{Rounds: 1500, Seed: seed, Max: 256 << 10, Slow: 40, Stall: time.Minute}
	if onGPU {
		cfg.GPU, cfg.Max, cfg.Rounds = true, 4<<20, 600
	}
	n, err := p2psoak.Run(w, cfg)
	if err != nil {
		return err
	}
	if n["sent by isend"] == 0 || n["fenced rounds"] == 0 {
		return fmt.Errorf("the schedule ran nearly nothing: %v", n)
	}
	return nil
}
