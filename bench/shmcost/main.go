// Command shmcost times ways of backing and mapping a /dev/shm file of 1
// and 32 MiB, three times each: fallocate then a MAP_POPULATE mapping (and
// a second such mapping: a peer adopting it), fallocate then touching
// every page, a mapping then shmseg.Back (MADV_POPULATE_WRITE), a plain
// mapping (docs/measurements.md, "The first call's set-up").
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/internal/shmseg"
	"golang.org/x/sys/unix"
)

// must stops the program on an error: a figure of a failed call means nothing.
func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "shmcost:", err)
		os.Exit(1)
	}
}

func mapOf(fd, size, flags int) []byte {
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|flags)
	must(err)
	return b
}

func ms(t time.Time) string { return fmt.Sprintf("%.3f", float64(time.Since(t).Microseconds())/1e3) }

func file(size int) (int, string) {
	p := fmt.Sprintf("%s/shmcost-%d", shmseg.Dir, os.Getpid())
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	must(err)
	must(unix.Ftruncate(fd, int64(size)))
	return fd, p
}

func main() {
	for _, size := range []int{1 << 20, 32 << 20} {
		for rep := 0; rep < 3; rep++ {
			// A: fallocate, mmap populate (btl/sm's rings), then a second mapping populated (the receiver's adopt)
			fd, p := file(size)
			t := time.Now()
			must(unix.Fallocate(fd, 0, 0, int64(size)))
			a1 := ms(t)
			t = time.Now()
			b := mapOf(fd, size, unix.MAP_POPULATE)
			a2 := ms(t)
			t = time.Now()
			b2 := mapOf(fd, size, unix.MAP_POPULATE)
			a3 := ms(t)
			unix.Munmap(b)
			unix.Munmap(b2)
			unix.Close(fd)
			unix.Unlink(p)
			// B: fallocate, mmap without populate, touch every page
			fd, p = file(size)
			t = time.Now()
			must(unix.Fallocate(fd, 0, 0, int64(size)))
			b1 := ms(t)
			t = time.Now()
			b = mapOf(fd, size, 0)
			for i := 0; i < size; i += 4096 {
				b[i] = 1
			}
			b2s := ms(t)
			unix.Munmap(b)
			unix.Close(fd)
			unix.Unlink(p)
			// C: mmap and shmseg.Back (MADV_POPULATE_WRITE: allocates, zeroes, maps; errors instead of SIGBUS), then a second mapping populated the same way (its pages allocated already)
			fd, p = file(size)
			t = time.Now()
			b = mapOf(fd, size, 0)
			err := shmseg.Back(fd, b, 0)
			c1 := ms(t)
			t = time.Now()
			b2 = mapOf(fd, size, 0)
			err2 := unix.Madvise(b2, unix.MADV_POPULATE_WRITE)
			c2 := ms(t)
			t = time.Now()
			b3 := mapOf(fd, size, 0)
			c3 := ms(t)
			unix.Munmap(b)
			unix.Munmap(b2)
			unix.Munmap(b3)
			unix.Close(fd)
			unix.Unlink(p)
			fmt.Printf("%6d KiB: A fallocate %s mmap-populate %s again %s | B fallocate %s touch %s | C mmap+Back %s (%v) again %s (%v) plain mmap %s\n",
				size>>10, a1, a2, a3, b1, b2s, c1, err, c2, err2, c3)
		}
	}
}
