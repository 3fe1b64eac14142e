package shmseg

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBack: Back allocates exactly the pages of the mapping it is given,
// zeroed, in a sparse file, and the memory is the file's (another mapping
// sees it).
func TestBack(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(Dir, fmt.Sprintf("gorun-test-shmseg-%d", os.Getpid()))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Unlink(path)
	if err := unix.Ftruncate(fd, int64(8*page)); err != nil {
		t.Fatal(err)
	}
	blocks := func() int {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Blocks) * 512
	}
	if got := blocks(); got != 0 {
		t.Fatalf("a new sparse file holds %d bytes", got)
	}
	b, err := unix.Mmap(fd, int64(2*page), 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	if err := Back(fd, b, int64(2*page)); err != nil {
		t.Fatal(err)
	}
	if got := blocks(); got != 3*page {
		t.Errorf("after Back: %d bytes allocated, want %d", got, 3*page)
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("byte %d is %d, not zero", i, x)
		}
	}
	b[page+5] = 42
	all, err := unix.Mmap(fd, 0, 8*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(all)
	if all[3*page+5] != 42 {
		t.Error("the memory backed is not the file's")
	}
}
