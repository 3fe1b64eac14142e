package gpu

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestGPUIPC exports a sub-range of a buffer, has a child process map it on
// another GPU (the same one when there is only one), check what it reads and
// write something else, and checks the write here.
func TestGPUIPC(t *testing.T) {
	n := requireGPU(t, 1)
	const count, off = 1 << 20, 1000
	b, err := Alloc(0, Int32, count)
	must(t, err)
	defer b.Free()
	src := make([]int32, count)
	for i := range src {
		src[i] = int32(i*3 + 7)
	}
	must(t, Upload(b, src))
	h, err := b.Slice(off, count).ExportIPC()
	must(t, err)
	if h.Offset != off*4 || h.Bytes != (count-off)*4 || h.DType != Int32 {
		t.Fatalf("handle %+v", h)
	}
	hb, _ := h.MarshalBinary()
	childDev := min(1, n-1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=ipc", "GORUN_GPU_TEST_HANDLE="+hex.EncodeToString(hb),
		"GORUN_GPU_TEST_DEV="+strconv.Itoa(childDev))
	out, err := cmd.CombinedOutput()
	t.Logf("child on device %d: %s", childDev, out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	got := make([]int32, count)
	must(t, Download(got, b))
	for i := range got {
		want := src[i]
		if i >= off {
			want = -int32(i - off)
		}
		if got[i] != want {
			t.Fatalf("after the child wrote: element %d = %d, want %d", i, got[i], want)
		}
	}
}

// ipcChild is TestGPUIPC's child: it maps the parent's buffer, checks it and
// overwrites it with -i.
func ipcChild() error {
	hb, err := hex.DecodeString(os.Getenv("GORUN_GPU_TEST_HANDLE"))
	if err != nil {
		return err
	}
	var h IPCHandle
	if err := h.UnmarshalBinary(hb); err != nil {
		return err
	}
	dev, _ := strconv.Atoi(os.Getenv("GORUN_GPU_TEST_DEV"))
	b, err := OpenIPC(dev, h)
	if err != nil {
		return err
	}
	got := make([]int32, b.Count())
	if err := Download(got, b); err != nil {
		return err
	}
	for i, v := range got {
		if want := int32((i+1000)*3 + 7); v != want {
			return fmt.Errorf("element %d = %d, want %d", i, v, want)
		}
		got[i] = -int32(i)
	}
	if err := Upload(b, got); err != nil {
		return err
	}
	info, err := PointerInfo(b.Ptr())
	if err != nil {
		return err
	}
	fmt.Printf("mapped %v; pointer info %+v; read and wrote %d elements\n", b, info, len(got))
	return b.Free()
}
