package hostinfo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/gorun/gorun/internal/shmseg"
	"golang.org/x/sys/unix"
)

// AllowedCPUs lists the CPUs this process may run on (its affinity mask,
// as a cgroup or taskset left it), or every CPU when the mask cannot be
// read.
func AllowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		cpus := make([]int, runtime.NumCPU())
		for i := range cpus {
			cpus[i] = i
		}
		return cpus
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// ProcState is the state letter of process pid (/proc/<pid>/stat: R, S,
// D, T stopped, t traced, Z...), or 0 when it cannot be read.
func ProcState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold anything: the state
	// follows the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// Stopped reports whether a process state letter (ProcState) is a stopped
// one: SIGSTOP, or a tracer.
func Stopped(state byte) bool { return state == 'T' || state == 't' }

// FileID identifies a file's version cheaply, as rsync's quick check does:
// size and modification time ("" when it is not a regular file). Copies
// are verified by checksum instead.
func FileID(path string) string {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Size(), st.ModTime().Unix())
}

// RemoveSegments removes the shared-memory segments of job id from
// /dev/shm (every segment the runtime creates is named gorun-<job>-*).
func RemoveSegments(id string) {
	m, _ := filepath.Glob(filepath.Join(shmseg.Dir, "gorun-"+id+"-*"))
	for _, f := range m {
		os.Remove(f)
	}
}
