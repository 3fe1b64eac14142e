package launcher

import (
	"fmt"
	"strconv"
	"strings"
)

// RankSlot is one line of a rankfile (--rankfile, Open MPI's syntax):
// rank Rank runs on Host, bound to CPU (-1: placed by --bind-to's policy).
type RankSlot struct {
	Rank int
	Host string
	CPU  int
}

// ParseRankfile reads an Open MPI rankfile: "rank N=HOST slot=CPU" per
// line ("slot=" optional), '#' comments. gorun binds a rank to one CPU, so
// Open MPI's socket:core and CPU-list slots are refused by name. The ranks
// must be 0..n-1, each once. A line it cannot read is an error naming
// FILE:LINE.
func ParseRankfile(path string) ([]RankSlot, error) {
	var out []RankSlot
	seen := map[int]bool{}
	err := eachLine(path, "rankfile", func(l fileLine) error {
		fields, bad := l.fields, l.bad
		if fields[0] != "rank" || len(fields) < 2 || len(fields) > 3 {
			return bad("expected \"rank N=HOST [slot=CPU]\"")
		}
		rs, host, ok := strings.Cut(fields[1], "=")
		n, err := strconv.Atoi(rs)
		if !ok || err != nil || n < 0 || host == "" {
			return bad("expected \"rank N=HOST\", not %q", fields[1])
		}
		if strings.HasPrefix(host, "+") {
			return bad("relative host %q (+n, +e) is not supported: name the host", host)
		}
		if seen[n] {
			return bad("rank %d given twice", n)
		}
		seen[n] = true
		s := RankSlot{Rank: n, Host: host, CPU: -1}
		if len(fields) == 3 {
			k, v, _ := strings.Cut(fields[2], "=")
			if k != "slot" {
				return bad("expected slot=CPU, not %q", fields[2])
			}
			cpu, err := strconv.Atoi(v)
			if err != nil || cpu < 0 {
				return bad("slot=%s: gorun binds a rank to one CPU, given by its number (socket:core and CPU lists are not supported)", v)
			}
			s.CPU = cpu
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rankfile %s: no ranks", path)
	}
	for r := range len(out) {
		if !seen[r] {
			return nil, fmt.Errorf("rankfile %s: rank %d missing (ranks must be 0..%d, each once)", path, r, len(out)-1)
		}
	}
	slots := make([]RankSlot, len(out))
	for _, s := range out {
		slots[s.Rank] = s
	}
	return slots, nil
}

// rankLayout places the ranks as the rankfile says, onto the job's hosts
// (names); a host the rankfile names that is not among them is an error.
func rankLayout(rf []RankSlot, names []string) (layout, error) {
	l := layout{localSize: make([]int, len(names))}
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
	}
	for _, s := range rf {
		h, ok := idx[s.Host]
		if !ok {
			return l, fmt.Errorf("rankfile: rank %d on %s, which is not among the hosts (%s)", s.Rank, s.Host, strings.Join(names, ", "))
		}
		l.ranks = append(l.ranks, placement{host: h, local: l.localSize[h]})
		l.localSize[h]++
	}
	return l, nil
}

// rankfileHosts is the host list a rankfile implies when no -H or hostfile
// is given: its hosts in order of first use, each with as many slots as
// ranks.
func rankfileHosts(rf []RankSlot) []Host {
	var hosts []Host
	for _, s := range rf {
		hosts = mergeHost(hosts, Host{Name: s.Host, Slots: 1})
	}
	for i := range hosts {
		hosts[i].Entry = fmt.Sprintf("the rankfile (%d ranks)", hosts[i].Slots)
	}
	return hosts
}
