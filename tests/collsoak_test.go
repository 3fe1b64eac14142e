package tests

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/collsoak"
	"github.com/gorun/gorun/mpi"
)

// TestCollSoak runs a random schedule of every collective, blocking and
// nonblocking, on four communicators, at sizes around the algorithms'
// limits, with ranks falling behind now and then, and checks every
// result against the one computed from the inputs (internal/collsoak;
// bench/collsoak runs it for long). Different seeds, rank counts and
// settings: the defaults, a small bcast ring (most bcasts through the
// buffers) with the numbering crossing 2^40 (each of the
// communicators makes a few hundred calls), the reduction tree from 2
// ranks, the point-to-point algorithms only, and over TCP.
func TestCollSoak(t *testing.T) {
	runSoaks(t, "coll-soak", 120*time.Second, nil, []soakCase{
		{"np=3", 3, nil},
		{"np=4/ahead=24/seq=2^40", 4, []string{"GORUN_COLL_SHM_AHEAD=24", fmt.Sprintf("GORUN_COLL_SEQ_START=%d", 1<<40-150)}},
		{"np=5/tree", 5, []string{"GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_RADIX=2"}},
		{"np=4/p2p", 4, []string{"GORUN_COLL_SHM=0"}},
		{"np=3/tcp", 3, []string{"GORUN_BTL=tcp,self"}},
	})
}

// TestGPUCollSoak is TestCollSoak on device buffers through the GPU
// collectives (a GPU host runs it): up to 1 MiB a rank, so that the
// calls cross the algorithms' 256 KiB; ranks sharing a GPU, and two
// pretend hosts (the hierarchical algorithms, staging over TCP).
func TestGPUCollSoak(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skipf("no GPU: %s", why)
	}
	runSoaks(t, "coll-soak", 300*time.Second, []string{"GORUN_TEST_SOAK_GPU=1"}, gpuSoakCases)
}

// soakCase is one setting a soak test runs its rank case in.
type soakCase struct {
	name string
	np   int
	env  []string
}

// gpuSoakCases are the GPU soaks' settings: two ranks, three (two on a
// GPU), and two pretend hosts (staging between them).
var gpuSoakCases = []soakCase{
	{"np=2", 2, nil},
	{"np=3", 3, nil},
	{"np=4/two-hosts", 4, []string{"GORUN_FAKE_HOSTS=2"}},
}

// runSoaks runs rank case cas in each setting as a subtest, with env
// added to the setting's and a seed of its own: a hash of the test's
// full name.
func runSoaks(t *testing.T, cas string, timeout time.Duration, env []string, cases []soakCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fnv.New32a()
			h.Write([]byte(t.Name()))
			e := append([]string{"GORUN_TEST_SOAK_SEED=" + strconv.Itoa(int(h.Sum32()))}, env...)
			job{np: tc.np, cas: cas, env: append(e, tc.env...), timeout: timeout}.ok(t)
		})
	}
}

// soakSetting is what runSoaks told a soak's rank case: its seed, and
// whether its buffers are device memory.
func soakSetting() (seed uint64, onGPU bool) {
	seed, _ = strconv.ParseUint(os.Getenv("GORUN_TEST_SOAK_SEED"), 10, 64)
	return seed, os.Getenv("GORUN_TEST_SOAK_GPU") == "1"
}

func init() { rankCases["coll-soak"] = caseCollSoak }

func caseCollSoak(w *mpi.Comm) error {
	seed, onGPU := soakSetting()
	cfg := collsoak.Config{Calls: 1500, Seed: seed, Max: 160 << 10, Slow: 40}
	if onGPU {
		cfg.GPU, cfg.Max, cfg.Calls = true, 1<<20, 600
	}
	n, err := collsoak.Run(w, cfg)
	if err != nil {
		return err
	}
	total := 0
	for _, c := range n {
		total += c
	}
	if total < cfg.Calls {
		return fmt.Errorf("only %d calls ran: %v", total, n)
	}
	return nil
}
