package launcher

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{"node1", []string{"node1"}, ""},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}, ""},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}, ""},
		{"n[08-11]", []string{"n08", "n09", "n10", "n11"}, ""},
		{"n[098-101]", []string{"n098", "n099", "n100", "n101"}, ""},
		{"a,b[1-2],c", []string{"a", "b1", "b2", "c"}, ""},
		{"rack[1-2]-node[1-2]", []string{"rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"}, ""},
		{"gpu[3]", []string{"gpu3"}, ""},
		{"x[1-2].ib", []string{"x1.ib", "x2.ib"}, ""},
		{"cn[1-2],gpu[01-02],login", []string{"cn1", "cn2", "gpu01", "gpu02", "login"}, ""},
		{"[1-2]", []string{"1", "2"}, ""},
		{"node[1-", nil, "'[' without ']'"},
		{"node1]", nil, "']' without '['"},
		{"node[4-1]", nil, "goes down"},
		{"node[a-b]", nil, "not a number"},
		{"node[1-]", nil, "not a number"},
		{"node[]", nil, "not a number"},
		{"a,,b", nil, "empty entry"},
		{"n[1-[2]]", nil, "nested"},
		{"", nil, "empty entry"},
	}
	for _, c := range cases {
		got, err := ExpandHostlist(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseTasksPerNode(t *testing.T) {
	for in, want := range map[string][]int{"2(x3),1": {2, 2, 2, 1}, "4": {4}, "1,2,3": {1, 2, 3}, "16(x2)": {16, 16}} {
		if got, err := ParseTasksPerNode(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2(3)", "2(x0)", "x", "2(x3", "-1"} {
		if got, err := ParseTasksPerNode(in); err == nil {
			t.Errorf("%q: %v, want an error", in, got)
		}
	}
}

func TestFindAllocation(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	a, err := FindAllocation(env(map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2),1", "SLURM_JOB_CPUS_PER_NODE": "8(x3)"}))
	if err != nil || a.NP != 5 || len(a.Hosts) != 3 || a.Hosts[0].Name != "n1" || a.Hosts[0].Slots != 2 || a.Hosts[2].Slots != 1 || a.CPUs["n3"] != 8 || a.System != "Slurm job 42" {
		t.Errorf("%+v, %v", a, err)
	}
	a, err = FindAllocation(env(map[string]string{"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS": "3"}))
	if err != nil || a.NP != 3 {
		t.Errorf("SLURM_NTASKS: %+v, %v", a, err)
	}
	if _, err := FindAllocation(env(map[string]string{"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2"})); err == nil || !strings.Contains(err.Error(), "gives 1 nodes") {
		t.Errorf("mismatch: %v", err)
	}
	if a, err := FindAllocation(env(nil)); a != nil || err != nil {
		t.Errorf("no allocation: %+v, %v", a, err)
	}
	nf := filepath.Join(t.TempDir(), "nodes")
	os.WriteFile(nf, []byte("c1\nc1\nc2\nc1\n"), 0o644)
	a, err = FindAllocation(env(map[string]string{"PBS_NODEFILE": nf}))
	if err != nil || a.NP != 4 || len(a.Hosts) != 2 || a.Hosts[0].Slots != 3 || a.Hosts[1].Slots != 1 {
		t.Errorf("PBS: %+v, %v", a, err)
	}
}
