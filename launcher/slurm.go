package launcher

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gorun/gorun/launcher/boot"
)

// Batch allocations: Slurm's (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE,
// SLURM_NTASKS) and PBS's (PBS_NODEFILE). Inside one, `gorun ./app` with
// no -np or host list runs on the allocation, as mpirun does.

// ExpandHostlist expands a Slurm hostlist: "node[01-04,07]",
// "rack[1-2]-node[1-2]" (every combination, the first bracket varying
// slowest, as Slurm orders them), "a,b[1-3],c" (commas outside brackets
// separate entries). A range keeps the zero padding of its lower bound
// ("[08-11]": 08 09 10 11).
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for _, item := range splitTop(s) {
		if item == "" {
			return nil, fmt.Errorf("hostlist %q: empty entry", s)
		}
		names, err := expandItem(item)
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q: no hosts", s)
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

// expandItem expands one entry: a prefix, then a bracket, then the rest
// (expanded recursively).
func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("%q: ']' without '['", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: '[' without ']'", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(body, "[") {
		return nil, fmt.Errorf("%q: nested brackets", item)
	}
	var nums []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if lo == "" || hi == "" || err1 != nil || err2 != nil || a < 0 {
			return nil, fmt.Errorf("%q: %q is not a number or a range N-M", item, r)
		}
		if b < a {
			return nil, fmt.Errorf("%q: range %q goes down", item, r)
		}
		if b-a >= 1<<16 {
			return nil, fmt.Errorf("%q: range %q is too large", item, r)
		}
		for n := a; n <= b; n++ {
			nums = append(nums, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	tails, err := expandItem(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nums {
		for _, t := range tails {
			out = append(out, prefix+n+t)
		}
	}
	return out, nil
}

// ParseTasksPerNode reads Slurm's per-node counts (SLURM_TASKS_PER_NODE,
// SLURM_JOB_CPUS_PER_NODE): "2(x3),1" is 2, 2, 2, 1.
func ParseTasksPerNode(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, fmt.Errorf("tasks per node %q: %q is not N or N(xM)", s, part)
			}
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		v, err1 := strconv.Atoi(n)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || v < 0 || r < 1 {
			return nil, fmt.Errorf("tasks per node %q: %q is not N or N(xM)", s, part)
		}
		for range r {
			out = append(out, v)
		}
	}
	return out, nil
}

// Allocation is a batch system's allocation found in the environment.
type Allocation struct {
	// System names it in messages: "Slurm job 1234", "PBS".
	System string
	Hosts  []Host
	// NP is the number of tasks the allocation asked for (SLURM_NTASKS,
	// else the sum of the slots).
	NP int
	// CPUs is each host's CPU count in the allocation (Slurm's
	// SLURM_JOB_CPUS_PER_NODE), or nil.
	CPUs map[string]int
}

// FindAllocation reads a Slurm (SLURM_JOB_NODELIST) or PBS (PBS_NODEFILE)
// allocation from getenv; nil when there is none.
func FindAllocation(getenv func(string) string) (*Allocation, error) {
	if nl := cmp.Or(getenv("SLURM_JOB_NODELIST"), getenv("SLURM_NODELIST")); nl != "" {
		return slurmAllocation(nl, getenv)
	}
	if f := getenv("PBS_NODEFILE"); f != "" {
		hosts, err := ParseNodefile(f)
		if err != nil {
			return nil, fmt.Errorf("PBS_NODEFILE: %w", err)
		}
		a := &Allocation{System: "PBS", Hosts: hosts}
		for _, h := range hosts {
			a.NP += h.Slots
		}
		return a, nil
	}
	return nil, nil
}

func slurmAllocation(nodelist string, getenv func(string) string) (*Allocation, error) {
	names, err := ExpandHostlist(nodelist)
	if err != nil {
		return nil, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
	}
	a := &Allocation{System: "Slurm job " + cmp.Or(getenv("SLURM_JOB_ID"), "(no SLURM_JOB_ID)")}
	var tasks []int
	if tpn := getenv("SLURM_TASKS_PER_NODE"); tpn != "" {
		if tasks, err = ParseTasksPerNode(tpn); err != nil {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE: %w", err)
		}
		if len(tasks) != len(names) {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE=%q gives %d nodes, SLURM_JOB_NODELIST=%q %d", tpn, len(tasks), nodelist, len(names))
		}
	}
	if cpn := getenv("SLURM_JOB_CPUS_PER_NODE"); cpn != "" {
		if cpus, err := ParseTasksPerNode(cpn); err == nil && len(cpus) == len(names) {
			a.CPUs = map[string]int{}
			for i, n := range names {
				a.CPUs[n] = cpus[i]
			}
		}
	}
	for i, n := range names {
		h := Host{Name: n, Entry: fmt.Sprintf("%s's nodes (SLURM_JOB_NODELIST)", a.System)}
		if tasks != nil {
			h.Slots = tasks[i]
			h.Entry = fmt.Sprintf("%s (SLURM_TASKS_PER_NODE: %d)", a.System, tasks[i])
		}
		a.Hosts = append(a.Hosts, h)
		a.NP += h.Slots
	}
	if nt := getenv("SLURM_NTASKS"); nt != "" {
		if a.NP, err = strconv.Atoi(nt); err != nil || a.NP < 1 {
			return nil, fmt.Errorf("SLURM_NTASKS=%q: not a positive number", nt)
		}
	}
	if a.NP == 0 {
		a.NP = len(names) // no task counts at all: one per node
	}
	return a, nil
}

// ParseNodefile reads a PBS nodefile: one host name per line and per
// slot (a host listed 4 times has 4 slots).
func ParseNodefile(path string) ([]Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hosts []Host
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		hosts = mergeHost(hosts, Host{Name: name, Slots: 1})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, errors.New(path + ": no hosts")
	}
	for i := range hosts {
		hosts[i].Entry = fmt.Sprintf("PBS_NODEFILE (%d lines)", hosts[i].Slots)
	}
	return hosts, nil
}

// ForeignLauncher recognizes another launcher's environment in getenv
// (mpirun, a PMI or PMIx launcher, srun) and returns its name and the
// number of processes it started (0: none).
func ForeignLauncher(getenv func(string) string) (string, int) {
	return boot.ForeignLauncher(getenv)
}
