package launcher

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gorun/gorun/launcher/internal/hostinfo"
)

// Host is one entry of the job's host list, as given with -H or in a
// hostfile (Open MPI's syntax).
type Host struct {
	// Name is what the user wrote: an ssh config alias, a host name or an
	// address. "localhost" (and this machine's own names and addresses)
	// means the launcher's own host: its ranks are started directly, with
	// no ssh.
	Name string
	// Slots is how many ranks the host takes before it is oversubscribed;
	// 0 means its number of usable CPUs, learnt when gorun reaches it.
	Slots int
	// MaxSlots is a hard limit on the ranks placed there even when
	// oversubscribing (0: none).
	MaxSlots int
	// Port is the ssh port (a hostfile's port=P); empty: the ssh config's
	// Port, else 22. "host:N" is always N slots, never a port.
	Port string
	// Entry is what the user wrote for this host, and how gorun read it
	// (for --display-map): `"node1:2" (2 slots)`; entries of a repeated
	// name are joined.
	Entry string
}

// parseHostItem reads one host as -H and hostfiles write it: host,
// host:N (N slots, as mpirun's -H and MPICH's hostfiles), [address] or
// [address]:N (an IPv6 address, with slots). A bare IPv6 address (more
// than one colon) is a name. what names the source in errors.
func parseHostItem(item, what string) (Host, error) {
	h := Host{Name: item}
	slots := ""
	switch {
	case strings.HasPrefix(item, "["): // [v6addr] or [v6addr]:slots
		end := strings.IndexByte(item, ']')
		if end < 0 || (end+1 < len(item) && item[end+1] != ':') {
			return h, fmt.Errorf("%s: %q: expected [address] or [address]:slots", what, item)
		}
		h.Name = item[1:end]
		if end+1 < len(item) {
			slots = item[end+2:]
			if slots == "" {
				return h, fmt.Errorf("%s: %q: slots must be a positive number", what, item)
			}
		}
	case strings.Count(item, ":") == 1: // host:slots; a bare IPv6 address has more colons
		h.Name, slots, _ = strings.Cut(item, ":")
		if slots == "" {
			return h, fmt.Errorf("%s: %q: slots must be a positive number", what, item)
		}
	}
	if slots != "" {
		n, err := strconv.Atoi(slots)
		if err != nil || n < 1 {
			return h, fmt.Errorf("%s: %q: slots must be a positive number (host:N means N slots; an ssh port goes in the ssh config, or port=P in a hostfile)", what, item)
		}
		h.Slots = n
	}
	if h.Name == "" {
		return h, fmt.Errorf("%s: empty host name", what)
	}
	if strings.ContainsAny(h.Name, " \t=") {
		return h, fmt.Errorf("%s: %q is not a host name (host or host:N; slots=N belongs in a hostfile)", what, h.Name)
	}
	if strings.Count(h.Name, ":") > 1 {
		if _, err := netip.ParseAddr(h.Name); err != nil {
			return h, fmt.Errorf("%s: %q: expected host or host:N (an IPv6 address with slots is [address]:N)", what, item)
		}
	}
	return h, nil
}

// describe says how an entry was read, for --display-map.
func (h Host) describe(written string) string {
	var r []string
	if h.Slots == 1 {
		r = append(r, "1 slot")
	} else if h.Slots > 0 {
		r = append(r, fmt.Sprintf("%d slots", h.Slots))
	} else {
		r = append(r, "slots: its CPUs")
	}
	if h.MaxSlots > 0 {
		r = append(r, fmt.Sprintf("max %d", h.MaxSlots))
	}
	if h.Port != "" {
		r = append(r, "ssh port "+h.Port)
	}
	return fmt.Sprintf("%q (%s)", written, strings.Join(r, ", "))
}

// ParseHostList parses -H's argument: "h1:4,h2:4,h3" (host[:slots]).
// Repeated names are merged, their slots added.
func ParseHostList(s string) ([]Host, error) {
	var hosts []Host
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("-H %q: empty host name", s)
		}
		h, err := parseHostItem(item, fmt.Sprintf("-H %q", s))
		if err != nil {
			return nil, err
		}
		h.Entry = h.describe(item)
		hosts = mergeHost(hosts, h)
	}
	return hosts, nil
}

// ParseHostfile reads an Open MPI or MPICH hostfile: one host per line,
// written as -H writes one (host, host:N for N slots, [v6address]:N),
// optionally followed by slots=N, max_slots=M ("max-slots" and "count"
// are accepted too) and port=P (the ssh port); '#' starts a comment; blank
// lines are ignored. A line it cannot read is an error naming FILE:LINE.
func ParseHostfile(path string) ([]Host, error) {
	var hosts []Host
	err := eachLine(path, "hostfile", func(l fileLine) error {
		fields, bad := l.fields, l.bad
		if strings.Contains(fields[0], "=") {
			return bad("expected a host name first, not %q", fields[0])
		}
		h, err := parseHostItem(fields[0], fmt.Sprintf("%s:%d", path, l.n))
		if err != nil {
			return fmt.Errorf("%w (line %q)", err, l.text)
		}
		fromName := h.Slots
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return bad("%q is not key=value (slots=N, max_slots=M)", kv)
			}
			var dst *int
			switch strings.ToLower(k) {
			case "slots", "count", "cpu":
				if fromName > 0 {
					return bad("slots given twice (%s and %s)", fields[0], kv)
				}
				if h.Slots > 0 {
					return bad("slots given twice (slots=%d and %s)", h.Slots, kv)
				}
				dst = &h.Slots
			case "max_slots", "max-slots":
				if h.MaxSlots > 0 {
					return bad("max_slots given twice (%s)", kv)
				}
				dst = &h.MaxSlots
			case "port":
				if p, err := strconv.Atoi(v); err != nil || p < 1 || p > 65535 {
					return bad("port=%q: must be a port number", v)
				}
				h.Port = v
				continue
			default:
				return bad("unknown key %q (known: slots, max_slots, port)", k)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return bad("%s=%q: must be a positive number", k, v)
			}
			*dst = n
		}
		if h.MaxSlots > 0 && h.Slots > h.MaxSlots {
			return bad("slots=%d exceeds max_slots=%d", h.Slots, h.MaxSlots)
		}
		h.Entry = fmt.Sprintf("%s:%d ", filepath.Base(path), l.n) + h.describe(strings.Join(fields, " "))
		hosts = mergeHost(hosts, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hostfile %s: no hosts", path)
	}
	return hosts, nil
}

// fileLine is one line of a hostfile or rankfile that has fields once its
// '#' comment is cut.
type fileLine struct {
	path   string
	n      int    // its number, from 1
	text   string // as written, trimmed
	fields []string
}

// bad is an error naming FILE:LINE and quoting the line.
func (l fileLine) bad(format string, a ...any) error {
	return fmt.Errorf("%s:%d: %s (line %q)", l.path, l.n, fmt.Sprintf(format, a...), l.text)
}

// eachLine calls fn with each line of the file at path (what: hostfile,
// rankfile) that has fields, until fn's first error.
func eachLine(path, what string, fn func(fileLine) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if err := fn(fileLine{path: path, n: ln, text: strings.TrimSpace(sc.Text()), fields: fields}); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// mergeHost appends h, or adds its slots to an earlier entry of the same
// name (an unspecified count stays "all CPUs"), keeping the larger
// max_slots.
func mergeHost(hosts []Host, h Host) []Host { return mergeHostCaps(hosts, h, false) }

// mergeHostCaps is mergeHost; with sumCaps the max_slots add up instead,
// and an entry without one lifts the cap: two names of one machine
// (mergeLocalNames) are two capacities, where a name's repeated lines
// are one.
func mergeHostCaps(hosts []Host, h Host, sumCaps bool) []Host {
	for i := range hosts {
		if hosts[i].Name != h.Name {
			continue
		}
		if hosts[i].Slots == 0 || h.Slots == 0 {
			hosts[i].Slots = 0
		} else {
			hosts[i].Slots += h.Slots
		}
		switch {
		case sumCaps && (hosts[i].MaxSlots == 0 || h.MaxSlots == 0):
			hosts[i].MaxSlots = 0
		case sumCaps:
			hosts[i].MaxSlots += h.MaxSlots
		case h.MaxSlots > 0 && (hosts[i].MaxSlots == 0 || h.MaxSlots > hosts[i].MaxSlots):
			hosts[i].MaxSlots = h.MaxSlots
		}
		if h.Port != "" {
			hosts[i].Port = h.Port
		}
		if h.Entry != "" {
			hosts[i].Entry += " + " + h.Entry
		}
		return hosts
	}
	return append(hosts, h)
}

// mergeLocalNames makes this host one entry when the list names it more
// than once (-H localhost:2,$(hostname):2), as mpirun does: its slots add
// up (mergeHost), and a rankfile's ranks on any of its names go to the
// first name's. Two entries would have started two sets of ranks on one
// machine, each numbering its local ranks and sharing out the CPUs as if
// it were alone.
func mergeLocalNames(hosts []Host, rf []RankSlot) ([]Host, []RankSlot) {
	// isLocalHost asks the system (host name, interface addresses) each
	// time: once a name here, however many rankfile lines repeat it.
	known := map[string]bool{}
	local := func(name string) bool {
		l, ok := known[name]
		if !ok {
			l = isLocalHost(name)
			known[name] = l
		}
		return l
	}
	first, aliased := "", false
	var out []Host
	for _, h := range hosts {
		if local(h.Name) {
			if first == "" {
				first = h.Name
			} else if h.Name != first {
				aliased = true
				h.Name = first
			}
		}
		out = mergeHostCaps(out, h, true)
	}
	if !aliased {
		out = hosts
	}
	if first == "" {
		return out, rf
	}
	// The rankfile may name this host otherwise than the list does.
	var moved []RankSlot
	for i, s := range rf {
		if s.Host != first && local(s.Host) {
			if moved == nil {
				moved = slices.Clone(rf)
			}
			moved[i].Host = first
		}
	}
	if moved == nil {
		return out, rf
	}
	return out, moved
}

// DefaultNP is the number of ranks of a job given hosts (-H, --hostfile)
// but no -np: every slot of every host, as mpirun fills them. A host
// listed without slots has its usable CPUs (mpirun: its cores, or one
// slot for each host of a -H list of several): this host's are known
// here; another's only once gorun reaches it, and then DefaultNP returns
// that host's name as unknown (the caller asks for -np rather than
// guess).
func DefaultNP(hosts []Host) (np int, unknown string) {
	// As place counts them: this host under several names is one host,
	// whose slots are its CPUs when one of its entries gives none.
	hosts, _ = mergeLocalNames(hosts, nil)
	for _, h := range hosts {
		cpus := 0
		if h.Slots == 0 {
			if !isLocalHost(h.Name) {
				return 0, h.Name
			}
			cpus = len(hostinfo.AllowedCPUs())
		}
		np += h.slotsOf(cpus)
	}
	return np, ""
}

// slotsOf is how many slots h has on a host of cpus usable CPUs: its
// slots, else its CPUs, within max_slots (slots taken from the CPUs, or
// added up from merged lines, stay within it: it was ignored without
// slots=).
func (h Host) slotsOf(cpus int) int {
	n := h.Slots
	if n == 0 {
		n = cpus
	}
	if h.MaxSlots > 0 && n > h.MaxSlots {
		n = h.MaxSlots
	}
	return n
}

// isLocalHost reports whether name means the launcher's own host: its
// ranks are started directly rather than through ssh.
func isLocalHost(name string) bool {
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "::1", "localhost.localdomain":
		return true
	}
	if hn, err := os.Hostname(); err == nil && strings.EqualFold(name, hn) {
		return true
	}
	ip := net.ParseIP(name)
	if ip == nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
