package osu

import (
	"io"
	"os"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// capture returns what f prints on stdout.
func capture(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	f()
	os.Stdout = old
	w.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestFormat: the lines scripts written for OSU's output parse: the title,
// the columns (none for the size of barrier), -f's statistics. A singleton
// world (np=1) makes min = max = mean.
func TestFormat(t *testing.T) {
	if err := mpi.Init(); err != nil {
		t.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	cases := []struct {
		full, sized bool
		want        string
	}{
		{false, true, "# OSU MPI Allreduce Latency Test v7.4\n# Size       Avg Latency(us)\n8                       1.50\n"},
		{true, true, "# OSU MPI Allreduce Latency Test v7.4\n# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n8                       1.50              1.50              1.50        1000\n"},
		{false, false, "# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n             1.50\n"},
		{true, false, "# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n             1.50              1.50              1.50        1000\n"},
	}
	for _, c := range cases {
		o := &Options{Full: c.full}
		title := "Allreduce Latency Test"
		if !c.sized {
			title = "Barrier Latency Test"
		}
		got := capture(t, func() {
			CollHeader(o, title, c.sized)
			CollStats(w, o, 8, c.sized, 1.5, 1000)
		})
		if got != c.want {
			t.Errorf("full %v sized %v:\n got %q\nwant %q", c.full, c.sized, got, c.want)
		}
	}
	got := capture(t, func() { Header("Latency Test", "Latency (us)"); Line(0, 0.25) })
	if want := "# OSU MPI Latency Test v7.4\n# Size          Latency (us)\n0                       0.25\n"; got != want {
		t.Errorf("latency:\n got %q\nwant %q", got, want)
	}
}
