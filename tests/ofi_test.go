//go:build cgo && ofi

package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// The ofi transport across network-namespace hosts, on libfabric's tcp
// provider (go test -tags ofi ./tests -run TestOFI). The rest of the
// suite runs over ofi too with GORUN_BTL=ofi,sm,self in the environment
// (btl/ofi/doc.go); these tests check that ofi, not tcp, carried the
// traffic, and that a rank killed in the middle of RDMA ends the job.

// ofiEnv makes ofi the transport between hosts, and has each rank say
// which provider it opened.
var ofiEnv = []string{"GORUN_BTL=ofi,sm,self", "GORUN_OFI_PROVIDER=tcp;ofi_rxm", "GORUN_OFI_VERBOSE=1"}

// ofiSizes cross what one message carries (16 KiB less 80 bytes), the
// eager limit on the tcp provider (64 KiB), the split of p2p's RMA
// rendezvous (256 KiB: the receiver reads half, the sender writes half)
// and the provider's eager size several times over.
var ofiSizes = []int{0, 1, 16303, 16305, 100000, 256<<10 + 3, 4<<20 + 1}

func init() {
	// ofi-pairs: ranks 2k and 2k+1 (on different hosts with --map-by
	// node) exchange every size both ways and check each byte.
	rankCases["ofi-pairs"] = func(w *mpi.Comm) error {
		me := w.Rank()
		peer := me ^ 1
		if peer >= w.Size() {
			return nil
		}
		for i, n := range ofiSizes {
			out := make([]byte, n)
			for j := range out {
				out[j] = byte(me*31 + i*7 + j*13)
			}
			in := make([]byte, n)
			if _, err := mpi.Sendrecv(w, out, peer, i, in, peer, i); err != nil {
				return fmt.Errorf("size %d: %w", n, err)
			}
			for j := range in {
				if in[j] != byte(peer*31+i*7+j*13) {
					return fmt.Errorf("size %d: byte %d from rank %d is %d", n, j, peer, in[j])
				}
			}
		}
		return mpi.Barrier(w)
	}
	// ofi-stream: even ranks send 64 MiB messages to the next rank until
	// the job ends: RDMA reads are in flight nearly all the time.
	rawCases["ofi-stream"] = func() int {
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		w := mpi.World()
		buf := make([]byte, 64<<20)
		markReady()
		for {
			var err error
			if w.Rank()%2 == 0 {
				err = mpi.Send(w, buf, w.Rank()+1, 5)
			} else {
				_, err = mpi.Recv(w, buf, w.Rank()-1, 5)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", w.Rank(), err)
				return 1
			}
		}
	}
}

// openedOFI checks that every rank opened ofi on the tcp provider.
func openedOFI(t *testing.T, stderr string, np int) {
	t.Helper()
	if n := strings.Count(stderr, "provider tcp;ofi_rxm"); n != np {
		t.Fatalf("%d of %d ranks opened ofi on the tcp provider:\n%s", n, np, stderr)
	}
}

// TestOFIMultiHost: messages of every protocol (eager, fragmented, RDMA
// rendezvous) between ranks of two hosts, over ofi.
func TestOFIMultiHost(t *testing.T) {
	nh := needNetHosts(t, 2, false)
	j := nh.job(4, "h1:2,h2:2", "--map-by", "node")
	j.cas = "ofi-pairs"
	j.env = ofiEnv
	r := j.ok(t)
	openedOFI(t, r.stderr, 4)
	checkNothingLeft(t, r)
}

// TestOFIRankKilled: a rank killed (SIGKILL) while its peer on the other
// host reads 64 MiB messages from it, or it from the peer, ends the job in
// bounded time, naming the rank, with nothing left on either host.
func TestOFIRankKilled(t *testing.T) {
	nh := needNetHosts(t, 2, false)
	for _, victim := range []int{0, 1} { // the sender, the receiver (on h2)
		t.Run(fmt.Sprint("rank", victim), func(t *testing.T) {
			j := nh.job(2, "h1:1,h2:1")
			j.cas = "ofi-stream"
			j.env = ofiEnv
			cmd, errb, dir := startReady(t, j)
			time.Sleep(200 * time.Millisecond) // transfers under way
			b, _ := os.ReadFile(filepath.Join(dir, "pid."+strconv.Itoa(victim)))
			pid, _ := strconv.Atoi(string(b))
			if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
				t.Fatalf("cannot kill rank %d (pid %q)", victim, b)
			}
			t0 := time.Now()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(hangGuard):
				cmd.Process.Kill()
				<-done
				t.Fatalf("job still running %v after rank %d was killed:\n%s", hangGuard, victim, errb)
			}
			took := time.Since(t0)
			code := cmd.ProcessState.ExitCode()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			want := fmt.Sprintf("rank %d (pid %d on h%d) was killed by signal 9", victim, pid, victim+1)
			if code != 128+9 || !strings.Contains(errb.String(), want) {
				t.Fatalf("exit %d after %v, want 137 and %q:\n%s", code, took, want, errb)
			}
			openedOFI(t, errb.String(), 2)
			t.Logf("gorun exited %v after the kill", took.Round(time.Millisecond))
			nh.checkNothingLeftOnHosts(t, 5*time.Second)
		})
	}
}

// TestOFIP2PSoak is TestP2PSoak with the messages over ofi (libfabric's
// tcp provider on loopback): every rank's, and between two pretend
// hosts (shared memory within each).
func TestOFIP2PSoak(t *testing.T) {
	prov := "GORUN_OFI_PROVIDER=tcp;ofi_rxm"
	runSoaks(t, "p2p-soak", 120*time.Second, nil, []soakCase{
		{"np=3", 3, []string{"GORUN_BTL=ofi,self", prov}},
		{"np=4/two-hosts", 4, []string{"GORUN_BTL=ofi,sm,self", "GORUN_FAKE_HOSTS=2", prov}},
	})
}
