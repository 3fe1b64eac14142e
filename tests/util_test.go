package tests

import (
	"os"
	"os/exec"
)

// execOut runs a program with extra environment and returns its output.
func execOut(prog string, env []string, args ...string) (string, error) {
	c := exec.Command(prog, args...)
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	return string(out), err
}
