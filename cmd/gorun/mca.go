package main

import (
	"fmt"
	"strings"

	"github.com/gorun/gorun/internal/params"
)

// mcaSetting is what --mca NAME VALUE becomes: a GORUN_* variable for
// gorun and the ranks, or --if-include.
type mcaSetting struct {
	env       string // KEY=value, or ""
	ifInclude string
	note      string // printed once on stderr, or ""
}

// openMPIBTL maps Open MPI's transport names to gorun's.
var openMPIBTL = map[string]string{"vader": "sm", "sm": "sm", "self": "self", "tcp": "tcp", "ofi": "ofi", "uct": "ofi", "openib": "ofi"}

// mcaToGorun reads --mca NAME VALUE. gorun's own tunables are accepted by
// their name (GORUN_SM_EAGER_LIMIT, or sm_eager_limit); the few Open MPI
// parameters with a direct gorun equivalent are translated with a note;
// any other is refused by name, since silently ignoring it would run a
// different job than the one asked for.
func mcaToGorun(p mcaParam) (mcaSetting, error) {
	switch p.name {
	case "btl":
		neg := strings.HasPrefix(p.value, "^")
		var out []string
		for _, b := range strings.Split(strings.TrimPrefix(p.value, "^"), ",") {
			g, ok := openMPIBTL[b]
			if !ok {
				return mcaSetting{}, fmt.Errorf("--mca btl %s: transport %q has no gorun equivalent (gorun has self, sm, tcp, ofi: set GORUN_BTL)", p.value, b)
			}
			out = append(out, g)
		}
		v := strings.Join(out, ",")
		if neg {
			v = "^" + v
		}
		return mcaSetting{env: "GORUN_BTL=" + v, note: fmt.Sprintf("gorun: note: --mca btl %s read as GORUN_BTL=%s", p.value, v)}, nil
	case "btl_tcp_if_include", "oob_tcp_if_include":
		return mcaSetting{ifInclude: p.value, note: fmt.Sprintf("gorun: note: --mca %s %s read as --if-include %s", p.name, p.value, p.value)}, nil
	}
	known := map[string]bool{}
	for _, q := range params.All() {
		known[q.Name] = true
	}
	name := strings.ToUpper(p.name)
	if !strings.HasPrefix(name, "GORUN_") {
		name = "GORUN_" + name
	}
	if known[name] {
		return mcaSetting{env: name + "=" + p.value}, nil
	}

	return mcaSetting{}, fmt.Errorf("--mca %s: not a gorun parameter; gorun's tunables are GORUN_* variables (gorun --help-params), given in the environment or as --mca GORUN_<NAME> VALUE", p.name)
}
