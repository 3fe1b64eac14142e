package launcher

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
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
		h := Host{Name: item}
		slots := ""
		switch {
		case strings.HasPrefix(item, "["): // [v6addr] or [v6addr]:slots
			end := strings.IndexByte(item, ']')
			if end < 0 || (end+1 < len(item) && item[end+1] != ':') {
				return nil, fmt.Errorf("-H %q: %q: expected [address]:slots", s, item)
			}
			h.Name = item[1:end]
			if end+1 < len(item) {
				slots = item[end+2:]
			}
		case strings.Count(item, ":") == 1: // host:slots; a bare IPv6 address has more colons
			h.Name, slots, _ = strings.Cut(item, ":")
		}
		if slots != "" || strings.HasSuffix(item, ":") {
			n, err := strconv.Atoi(slots)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-H %q: %q: slots must be a positive number", s, item)
			}
			h.Slots = n
		}
		if h.Name == "" {
			return nil, fmt.Errorf("-H %q: empty host name", s)
		}
		hosts = mergeHost(hosts, h)
	}
	return hosts, nil
}

// ParseHostfile reads an Open MPI hostfile: one host per line, optionally
// followed by slots=N and max_slots=M ("max-slots" and "count" are
// accepted too); '#' starts a comment; blank lines are ignored. A line it
// cannot read is an error naming FILE:LINE.
func ParseHostfile(path string) ([]Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	defer f.Close()
	var hosts []Host
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
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s (line %q)", path, ln, fmt.Sprintf(format, a...), strings.TrimSpace(sc.Text()))
		}
		h := Host{Name: fields[0]}
		if strings.Contains(h.Name, "=") {
			return nil, bad("expected a host name first, not %q", h.Name)
		}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, bad("%q is not key=value (slots=N, max_slots=M)", kv)
			}
			var dst *int
			switch strings.ToLower(k) {
			case "slots", "count", "cpu":
				dst = &h.Slots
			case "max_slots", "max-slots":
				dst = &h.MaxSlots
			default:
				return nil, bad("unknown key %q (known: slots, max_slots)", k)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, bad("%s=%q: must be a positive number", k, v)
			}
			*dst = n
		}
		if h.MaxSlots > 0 && h.Slots > h.MaxSlots {
			return nil, bad("slots=%d exceeds max_slots=%d", h.Slots, h.MaxSlots)
		}
		hosts = mergeHost(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile %s: %w", path, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hostfile %s: no hosts", path)
	}
	return hosts, nil
}

// mergeHost appends h, or adds its slots to an earlier entry of the same
// name (an unspecified count stays "all CPUs").
func mergeHost(hosts []Host, h Host) []Host {
	for i := range hosts {
		if hosts[i].Name != h.Name {
			continue
		}
		if hosts[i].Slots == 0 || h.Slots == 0 {
			hosts[i].Slots = 0
		} else {
			hosts[i].Slots += h.Slots
		}
		if h.MaxSlots > 0 && (hosts[i].MaxSlots == 0 || h.MaxSlots > hosts[i].MaxSlots) {
			hosts[i].MaxSlots = h.MaxSlots
		}
		return hosts
	}
	return append(hosts, h)
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
