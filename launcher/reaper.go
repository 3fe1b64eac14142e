package launcher

import (
	"os"
	"os/exec"
	"syscall"
)

// The reaper removes what a job leaves on this host, its temporary
// directory and its /dev/shm segments, even when gorun itself dies by
// SIGKILL and cannot. gorun starts it at launch, in a session of its own,
// with the read end of a pipe as its stdin, and keeps the write end. When
// gorun ends, however it ends, the pipe reaches EOF; the reaper removes
// the files (the ranks are gone by then: they die with gorun, Pdeathsig),
// looks once more after reapAgain for a segment a dying rank made at the
// last moment, and exits. After a normal end gorun has removed everything
// already. Ranks cannot remove their segments earlier themselves: a
// segment's name is needed until every local peer has opened it, and a
// rank killed by Pdeathsig runs no code.
//
// It is a shell, not gorun re-executed: starting a Go binary cost
// hello-world launches 16 ms (median of 25 at np=2, 73 -> 89 ms on the
// 2-core machine) against about 1 ms for sh. The job id (hex) and the
// directory (from os.MkdirTemp) reach it as arguments, never as script
// text.
const reaperScript = `cat >/dev/null; rm -rf -- "$1"; rm -f -- /dev/shm/gorun-"$2"-*; sleep 0.3; rm -f -- /dev/shm/gorun-"$2"-*`

// startReaper starts the reaper for job id and temporary directory tmp
// and returns the pipe's write end, to be closed after the job's own
// cleanup. Without /bin/sh it returns nil: the job runs, unguarded.
func startReaper(id, tmp string) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "gorun-reaper", tmp, id)
	cmd.Stdin = r // stdout, stderr: /dev/null, so a reader of gorun's output never waits for it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	r.Close()
	go cmd.Wait() // collected when it ends, after a normal end
	return w
}
