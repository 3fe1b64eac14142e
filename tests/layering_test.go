package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gorun/gorun/btl"
	_ "github.com/gorun/gorun/btl/all" // registers every built-in transport
)

// TestLayering enforces the layers of the package table in each doc.go (the design's): imports point down only.
func TestLayering(t *testing.T) {
	const mod = "github.com/gorun/gorun/"
	forbidden := map[string][]string{
		"launcher":      {"mpi", "coll", "p2p", "btl"},
		"launcher/boot": {"mpi", "coll", "p2p", "btl"},
		// The agent side and its contract sit below the launcher, which
		// imports them (its own host's agent runs in its process).
		"launcher/agent":             {"mpi", "coll", "p2p", "btl", "launcher"},
		"launcher/agentproto":        {"mpi", "coll", "p2p", "btl", "launcher", "launcher/agent"},
		"launcher/internal/hostinfo": {"mpi", "coll", "p2p", "btl", "launcher", "launcher/agent", "launcher/agentproto"},
		"btl":                        {"p2p", "coll", "mpi", "launcher"},
		"btl/all":                    {"p2p", "coll", "mpi", "launcher"},
		"btl/btltest":                {"p2p", "coll", "mpi", "launcher"},
		"p2p":                        {"coll", "mpi", "launcher"},
		"coll":                       {"mpi", "launcher", "btl/self", "btl/tcp"},
		"gpu":                        {"mpi", "coll", "p2p", "btl", "launcher"},
	}
	// Every registered transport (btl/<name>) stays below p2p and calls no
	// other transport.
	if len(btl.Names()) == 0 {
		t.Fatal("no transport registered: btl/all lists none")
	}
	for _, n := range btl.Names() {
		bad := []string{"p2p", "coll", "mpi", "launcher"}
		for _, o := range btl.Names() {
			if o != n {
				bad = append(bad, "btl/"+o)
			}
		}
		forbidden["btl/"+n] = bad
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "cannot find package") || strings.Contains(string(out), "no Go files") {
				continue // not written yet
			}
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, b := range bad {
				if d == mod+b {
					t.Errorf("%s imports %s (layering: imports point down only)", pkg, b)
				}
			}
		}
	}
}
