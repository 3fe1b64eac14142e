package btl

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

var (
	regMu      sync.Mutex
	components = map[string]Component{}
)

// Register makes a transport available under name. It is meant to be called
// from init; registering a name twice panics (a programmer's error).
func Register(name string, c Component) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := components[name]; dup {
		panic("btl: Register called twice for " + name)
	}
	components[name] = c
}

// Names lists the registered transports, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var n []string
	for k := range components {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// Filter is a parsed include/exclude list such as "tcp,self" (only those)
// or "^tcp" (all but those), the syntax of GORUN_BTL and of Open MPI's
// --mca btl.
type Filter struct {
	exclude bool
	names   []string
}

// ParseFilter parses an include/exclude list. The empty string allows all.
func ParseFilter(s string) (Filter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Filter{exclude: true}, nil
	}
	f := Filter{}
	if strings.HasPrefix(s, "^") {
		f.exclude = true
		s = s[1:]
	}
	known := Names()
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if strings.HasPrefix(n, "^") {
			return Filter{}, fmt.Errorf("btl: list %q mixes include and exclude", s)
		}
		if !slices.Contains(known, n) {
			return Filter{}, fmt.Errorf("btl: unknown transport %q in list (known: %s)", n, strings.Join(known, ", "))
		}
		f.names = append(f.names, n)
	}
	return f, nil
}

// Allows reports whether the filter admits the transport name.
func (f Filter) Allows(name string) bool {
	return slices.Contains(f.names, name) != f.exclude
}

// Names reports whether the filter is an include list that names name
// (a transport that stays off unless asked for by name opens then).
func (f Filter) Names(name string) bool {
	return !f.exclude && slices.Contains(f.names, name)
}

// OpenAll opens every registered transport the filter admits. A transport
// that fails to open is skipped with its error collected in skipped, so a
// missing optional facility (no /dev/shm, no RDMA device) never stops a job.
func OpenAll(env Env, f Filter) (mods []Module, skipped []error, err error) {
	for _, name := range Names() {
		if !f.Allows(name) {
			continue
		}
		regMu.Lock()
		c := components[name]
		regMu.Unlock()
		m, oerr := c.Open(env)
		if oerr != nil {
			skipped = append(skipped, fmt.Errorf("btl %s: %w", name, oerr))
			continue
		}
		mods = append(mods, m)
	}
	if len(mods) == 0 {
		return nil, skipped, fmt.Errorf("btl: no transport could be opened (filter %v): %v", f.names, skipped)
	}
	return mods, skipped, nil
}

// Route is the endpoint and module chosen for one peer.
type Route struct {
	Module   Module
	Endpoint Endpoint
	Caps     Caps
}

// Select returns the route to p through the most exclusive module that
// reaches it.
func Select(mods []Module, p Peer) (Route, error) {
	var best Route
	found := false
	for _, m := range mods {
		c := m.Caps()
		if found && c.Exclusivity <= best.Caps.Exclusivity {
			continue
		}
		ep, err := m.Reach(p)
		if err != nil {
			return Route{}, fmt.Errorf("btl %s: reach rank %d: %w", m.Name(), p.Rank, err)
		}
		if ep == nil {
			continue
		}
		best = Route{Module: m, Endpoint: ep, Caps: c}
		found = true
	}
	if !found {
		return Route{}, fmt.Errorf("rank %d: %w", p.Rank, ErrUnreachable)
	}
	return best, nil
}
