package btltest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// The child process's instructions, in its environment.
const (
	envChild  = "GORUN_BTLTEST_CHILD" // its role: "send" or "recv"
	envJob    = "GORUN_BTLTEST_JOB"
	envSecret = "GORUN_BTLTEST_SECRET"
)

// Lines the two processes exchange (on the child's stdout and stdin).
const (
	lineAddr  = "btltest-addr "
	lineBegin = "btltest-begin"
)

// childDeadline ends a child the parent forgot to kill.
const childDeadline = 60 * time.Second

// deathTimeout bounds how long a survivor may take to notice a dead peer.
const deathTimeout = 20 * time.Second

// runChild is the child's side: rank 1 of the parent's job. As "send" it
// sends one 64 MiB frame to rank 0 and polls until killed; as "recv" it
// polls until the first fragment of a frame from rank 0 arrives, says so,
// and kills itself (SIGKILL).
func runChild(tr Transport) int {
	time.AfterFunc(childDeadline, func() {
		fmt.Fprintf(os.Stderr, "btltest child: deadline %v passed\n%s", childDeadline, stacks())
		os.Exit(3)
	})
	role := os.Getenv(envChild)
	secret, _ := hex.DecodeString(os.Getenv(envSecret))
	nd := &node{rank: 1, eps: map[int]btl.Endpoint{}}
	nd.rec.init(nd)
	nd.snt.init(nd)
	m, err := tr.open(tr.env(os.Getenv(envJob), 1, 2, secret, &nd.rec))
	if err != nil {
		fmt.Fprintln(os.Stderr, "btltest child:", err)
		return 2
	}
	nd.mod = m
	fmt.Printf("%s%x\n", lineAddr, m.Address())
	addr, err := readAddr(bufio.NewScanner(os.Stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "btltest child:", err)
		return 2
	}
	ep, err := m.Reach(tr.peerOf(0, os.Getppid(), addr))
	if err != nil || ep == nil {
		fmt.Fprintf(os.Stderr, "btltest child: reach rank 0: %v %v\n", ep, err)
		return 2
	}
	nd.eps[0] = ep
	var id idler
	switch role {
	case "rma":
		return rmaChild(nd)
	case "send":
		if err := nd.send(0, maxFrame); err != nil {
			fmt.Fprintln(os.Stderr, "btltest child: send:", err)
			return 2
		}
		for {
			id.pass(nd, nd.progress())
		}
	case "recv":
		// Die inside the first Begin: a transport may read far more than
		// one fragment within a single Progress call.
		nd.rec.onBegin = func(src, n int) {
			fmt.Println(lineBegin)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(childDeadline)
		}
		for {
			id.pass(nd, nd.progress())
		}
	}
	fmt.Fprintf(os.Stderr, "btltest child: unknown role %q\n", role)
	return 2
}

func readAddr(sc *bufio.Scanner) ([]byte, error) {
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), lineAddr); ok {
			return hex.DecodeString(a)
		}
	}
	return nil, fmt.Errorf("no address line: %v", sc.Err())
}

// child is the parent's handle on the child process.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stdin  io.WriteCloser
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deathWorld opens rank 0 here and starts rank 1 as a child process in
// role, and has them exchange addresses. Cleanup kills and reaps the
// child, closes rank 0 and removes what the job left in /dev/shm (the
// child, killed, cannot), as the launcher does.
func (tr Transport) deathWorld(t *testing.T, role string) (*node, *child, btl.Peer) {
	t.Helper()
	job := newJob()
	secret := make([]byte, 32)
	rand.Read(secret)
	nd := &node{rank: 0, eps: map[int]btl.Endpoint{}}
	nd.rec.init(nd)
	nd.snt.init(nd)
	m, err := tr.open(tr.env(job, 0, 2, secret, &nd.rec))
	if err != nil {
		t.Fatal(err)
	}
	nd.mod = m

	top, _, _ := strings.Cut(t.Name(), "/")
	c := &child{lines: make(chan string, 16), stderr: &lockedBuffer{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+top+"$", "-test.count=1", "-test.v=false")
	c.cmd.Env = append(os.Environ(), envChild+"="+role, envJob+"="+job, envSecret+"="+hex.EncodeToString(secret))
	c.cmd.Stderr = c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
		nd.mu.Lock()
		nd.mod.Close()
		nd.mu.Unlock()
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		for _, f := range left {
			os.Remove(f)
		}
		if t.Failed() {
			t.Logf("child stderr:\n%s", c.stderr.String())
		}
	})

	var caddr []byte
	timeout := time.After(deathTimeout)
	for caddr == nil {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before publishing its address: %v\n%s", c.cmd.Wait(), c.stderr.String())
			}
			if a, found := strings.CutPrefix(l, lineAddr); found {
				if caddr, err = hex.DecodeString(a); err != nil {
					t.Fatalf("child address %q: %v", a, err)
				}
			}
		case <-timeout:
			t.Fatalf("child published no address in %v\n%s", deathTimeout, c.stderr.String())
		}
	}
	fmt.Fprintf(c.stdin, "%s%x\n", lineAddr, m.Address())
	return nd, c, tr.peerOf(1, c.cmd.Process.Pid, caddr)
}

// testSenderDies: the child sends a 64 MiB frame; at its first fragment
// the parent kills it (SIGKILL) and must hear PeerFailed, with no End for
// the half frame, in bounded time.
func testSenderDies(t *testing.T, tr Transport) {
	nd, c, _ := tr.deathWorld(t, "send")
	var killed time.Time
	nd.rec.onBegin = func(src, n int) {
		if src == 1 && killed.IsZero() {
			c.cmd.Process.Kill()
			killed = time.Now()
		}
	}
	drive(t, deathTimeout+childDeadline/2, []*node{nd}, func(nd *node) (bool, error) {
		if nd.rec.got[1] > 0 {
			return false, fmt.Errorf("a 64 MiB frame from a process killed at its first fragment was delivered")
		}
		_, failed := nd.rec.failed[1]
		if !failed && !killed.IsZero() && time.Since(killed) > deathTimeout {
			return false, fmt.Errorf("no PeerFailed %v after the sender was killed mid-frame (%s)", deathTimeout, nd.state())
		}
		return failed, nil
	})
	t.Logf("PeerFailed %v after the kill: %v", time.Since(killed).Round(time.Millisecond), nd.rec.failed[1])
}

// testReceiverDies: the parent sends a 64 MiB frame; the child kills
// itself at its first fragment, and the parent must see the frame fail
// (FrameDone with an error) or PeerFailed in bounded time.
func testReceiverDies(t *testing.T, tr Transport) {
	nd, c, p := tr.deathWorld(t, "recv")
	nd.mu.Lock()
	ep, err := nd.mod.Reach(p)
	if err != nil || ep == nil {
		nd.mu.Unlock()
		t.Fatalf("reach the child: %v %v", ep, err)
	}
	nd.eps[1] = ep
	err = nd.send(1, maxFrame)
	nd.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	var killed time.Time
	drive(t, deathTimeout+childDeadline/2, []*node{nd}, func(nd *node) (bool, error) {
		if killed.IsZero() {
			select {
			case l, ok := <-c.lines:
				if !ok {
					return false, fmt.Errorf("child exited before a fragment arrived: %s", c.stderr.String())
				}
				if l == lineBegin {
					killed = time.Now() // it kills itself right after
				}
			default:
			}
		}
		if nd.snt.ok > 0 {
			return false, fmt.Errorf("a 64 MiB frame completed although its receiver stopped at the first fragment")
		}
		_, failed := nd.rec.failed[1]
		if !killed.IsZero() && !failed && nd.snt.done == 0 && time.Since(killed) > deathTimeout {
			return false, fmt.Errorf("no failure %v after the receiver was killed mid-frame (%s)", deathTimeout, nd.state())
		}
		return failed || nd.snt.done > 0, nil
	})
	t.Logf("failure seen %v after the kill: frame errors %v, PeerFailed %v",
		time.Since(killed).Round(time.Millisecond), nd.snt.fails, nd.rec.failed[1])
}
