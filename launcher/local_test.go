package launcher

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLocalAgent runs jobs through Run with this host's agent in the test
// process (real ranks: shell commands): stdin that is not a file reaches
// rank 0 alone through stdin frames, each rank's output and status come
// back, and an MPMD job runs each program's ranks in order.
func TestLocalAgent(t *testing.T) {
	run := func(spec Spec) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		spec.Stdout, spec.Stderr = &out, &errb
		spec.Timeout = 30 * time.Second // a hang fails the test, not the run
		spec.BindTo = BindNone
		code, err := Run(spec)
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, errb.String())
		}
		return code, out.String(), errb.String()
	}

	code, out, errs := run(Spec{NP: 2, Program: "sh", Args: []string{"-c", `cat; echo "rank $RANK"`}, Stdin: strings.NewReader("typed\n")})
	if code != 0 || strings.Count(out, "typed\n") != 1 || !strings.Contains(out, "rank 0\n") || !strings.Contains(out, "rank 1\n") {
		t.Errorf("stdin to rank 0: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	code, _, errs = run(Spec{NP: 2, Program: "sh", Args: []string{"-c", `[ "$RANK" = 1 ] && exit 5; sleep 30`}})
	if code != 5 || !strings.Contains(errs, "rank 1 (pid ") || !strings.Contains(errs, "exited with status 5") {
		t.Errorf("a rank exits 5: exit %d, stderr %q", code, errs)
	}

	code, out, errs = run(Spec{Apps: []App{
		{NP: 1, Program: "sh", Args: []string{"-c", `echo "a $RANK of $WORLD_SIZE"`}},
		{NP: 2, Program: "echo", Args: []string{"b"}, Env: []string{"X=1"}},
	}})
	if code != 0 || !strings.Contains(out, "a 0 of 3\n") || strings.Count(out, "b\n") != 2 {
		t.Errorf("MPMD: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
