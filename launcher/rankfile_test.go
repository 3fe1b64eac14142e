package launcher

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseRankfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rf")
	write := func(body string) { os.WriteFile(p, []byte(body), 0o644) }
	write("# two hosts\nrank 1=n2 slot=3\nrank 0=n1\n\nrank 2=n1 slot=0 # pinned\n")
	got, err := ParseRankfile(p)
	want := []RankSlot{{0, "n1", -1}, {1, "n2", 3}, {2, "n1", 0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	l, err := rankLayout(got, []string{"n1", "n2"})
	if err != nil || !reflect.DeepEqual(l.ranks, []placement{{0, 0}, {1, 0}, {0, 1}}) || !reflect.DeepEqual(l.localSize, []int{2, 1}) {
		t.Errorf("layout %+v, %v", l, err)
	}
	if _, err := rankLayout(got, []string{"n1"}); err == nil || !strings.Contains(err.Error(), "rank 1 on n2, which is not among the hosts") {
		t.Errorf("a host outside -H: %v", err)
	}
	if h := rankfileHosts(got); len(h) != 2 || h[0].Name != "n1" || h[0].Slots != 2 || h[1].Slots != 1 {
		t.Errorf("hosts %+v", h)
	}
	for _, c := range []struct{ body, want string }{
		{"rank 0=n1 slot=1:0-2\n", "rf:1: slot=1:0-2: gorun binds a rank to one CPU"},
		{"rank 0=+n1\n", "relative host"},
		{"rank 0=n1\nrank 0=n2\n", "rf:2: rank 0 given twice"},
		{"rank 1=n1\n", "rank 0 missing"},
		{"host n1\n", "expected \"rank N=HOST [slot=CPU]\""},
		{"rank x=n1\n", "expected \"rank N=HOST\""},
		{"rank 0=n1 cpu=2\n", "expected slot=CPU"},
		{"# none\n", "no ranks"},
	} {
		write(c.body)
		if _, err := ParseRankfile(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
}
