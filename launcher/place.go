package launcher

// Where the ranks go: the hosts (connected in parallel, agents started),
// the mapping of ranks onto their slots, binding, and torchrun's rendezvous
// address.

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gorun/gorun/launcher/internal/hostinfo"
)

// setupHosts builds the host list and starts every host's agent: the
// other hosts' in parallel (ssh or srun), then this host's in this
// process. It returns the address the launcher's seed binds to.
func (j *job) setupHosts() (string, error) {
	hosts := j.spec.Hosts
	if len(hosts) == 0 {
		hosts = []Host{{Name: "localhost"}}
	}
	var remote []int
	for i, h := range hosts {
		hs := &hostState{name: h.Name, spec: h, here: isLocalHost(h.Name)}
		j.hosts = append(j.hosts, hs)
		if !hs.here {
			remote = append(remote, i)
		}
	}
	j.multi = len(remote) > 0
	bind := "127.0.0.1"
	if j.spec.IfInclude != "" {
		ip, err := hostinfo.MatchIfInclude(j.spec.IfInclude, hostinfo.Addrs())
		if err != nil {
			return "", fmt.Errorf("on this host (%s): %w", j.host, err)
		}
		bind = ip.String()
	}
	cfg, err := j.agentConfig()
	if err != nil {
		return "", err
	}
	if j.multi {
		if err := j.connectAll(cfg, remote); err != nil {
			return "", err
		}
		if j.spec.IfInclude == "" {
			// The address this host reached the first one from routes back.
			if ip := j.hosts[remote[0]].agent.from; ip != nil && !ip.IsUnspecified() {
				bind = ip.String()
			} else {
				bind = hostinfo.DefaultAddr("", hostinfo.Addrs()).String()
			}
		}
	}
	stdin, _ := j.spec.Stdin.(*os.File)
	if stdin != nil && isTerminal(stdin) {
		// A rank runs in a process group of its own, in the background
		// of gorun's terminal: its reads of the terminal would stop it
		// (SIGTTIN). gorun reads the terminal and forwards what is typed,
		// as it does for a rank on another host (forwardStdin).
		j.tty, stdin = stdin, nil
	}
	for i, hs := range j.hosts {
		if hs.here {
			if hs.agent, err = startLocal(cfg, hs.name, i, bind, stdin); err != nil {
				return "", err
			}
		}
		hello := hs.agent.hello
		hs.hostID, hs.addr, hs.cpus = hello.Host, hello.Addr, hello.CPUs
		if hs.hostID == "" {
			hs.hostID = hs.name
		}
		if len(hs.cpus) == 0 {
			for c := range max(hello.NCPU, 1) {
				hs.cpus = append(hs.cpus, c)
			}
		}
	}
	return bind, nil
}

// agentConfig is what every backend needs to start an agent.
func (j *job) agentConfig() (*agentConfig, error) {
	cfg := &agentConfig{progs: j.progs, ifInclude: j.spec.IfInclude, sums: &j.sums, stderr: j.errOut, cpus: j.spec.SlurmCPUs}
	for _, p := range j.progs {
		cfg.progIDs = append(cfg.progIDs, hostinfo.FileID(p))
	}
	if !j.multi {
		return cfg, nil
	}
	var err error
	if cfg.gorun, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("find gorun's own binary: %w", err)
	}
	switch j.spec.Agents {
	case "", AgentsSSH:
		if cfg.ssh, err = loadSSHSettings(j.spec.SSHConfig, j.spec.ConnectTimeout); err != nil {
			return nil, err
		}
	case AgentsSrun:
		if cfg.srun, err = exec.LookPath("srun"); err != nil {
			return nil, fmt.Errorf("agents by srun: %w", err)
		}
	default:
		return nil, fmt.Errorf("agents started by %q: expected ssh or srun", j.spec.Agents)
	}
	return cfg, nil
}

// connectAll starts the agents of the other hosts idx in parallel.
func (j *job) connectAll(cfg *agentConfig, idx []int) error {
	return j.onHosts(idx, func(i int) error {
		name := j.hosts[i].name
		if p := j.hosts[i].spec.Port; p != "" {
			name = net.JoinHostPort(name, p) // [v6]:port where it has colons
		}
		var h *agentConn
		var err error
		if cfg.srun != "" {
			// Starting a step takes longer than an ssh handshake.
			h, err = connectSrun(cfg, name, i, cfg.cpus[name], 3*cmp.Or(j.spec.ConnectTimeout, DefaultConnectTimeout), j.trace)
		} else {
			h, err = connectHost(cfg, name, i, j.trace)
		}
		j.hosts[i].agent = h
		return err
	})
}

// placePrograms makes sure that every host has the programs of the ranks
// placed on it (and only those), copying them where its agent can, all
// hosts in parallel.
func (j *job) placePrograms() error {
	idx := make([]int, len(j.hosts))
	for i := range idx {
		idx[i] = i
	}
	return j.onHosts(idx, func(i int) error {
		need := make([]bool, len(j.progs))
		for r, pl := range j.lay.ranks {
			if pl.host == i {
				need[j.appOf[r]] = true
			}
		}
		return j.hosts[i].agent.programs(j.progs, need)
	})
}

// onHosts runs f for each host of idx in parallel; every host that fails
// is named in the error.
func (j *job) onHosts(idx []int, f func(i int) error) error {
	errs := make([]error, len(j.hosts))
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	var msgs []string
	for i, err := range errs {
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("%s: %v", j.hosts[i].name, err))
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("cannot start on %d of %d hosts: %s", len(msgs), len(j.hosts), strings.Join(msgs, "; "))
	}
	return nil
}

// place maps the ranks onto the hosts, warns about oversubscription and
// reports bindings.
func (j *job) place() error {
	n := len(j.hosts)
	names := make([]string, n)
	slots := make([]int, n)
	maxs := make([]int, n)
	for i, hs := range j.hosts {
		names[i] = hs.name
		slots[i] = hs.spec.slotsOf(len(hs.cpus))
		maxs[i] = hs.spec.MaxSlots
	}
	var lay layout
	var err error
	if len(j.spec.Rankfile) > 0 {
		lay, err = rankLayout(j.spec.Rankfile, names)
		for i := range n {
			lay.slots += slots[i]
			lay.oversub = lay.oversub || lay.localSize[i] > slots[i]
		}
	} else {
		lay, err = plan(j.spec.NP, names, slots, maxs, j.spec.MapBy, j.spec.NoOversubscribe)
	}
	if err != nil {
		return err
	}
	for i, k := range lay.localSize {
		if k > MaxLocalNP {
			return usagef("%d ranks on %s: gorun starts at most %d ranks on one host", k, names[i], MaxLocalNP)
		}
	}
	j.lay = lay
	if lay.oversub {
		if len(j.spec.Hosts) == 0 {
			j.errOut.println(fmt.Sprintf("gorun: warning: %d ranks on %d cores; waiting ranks will yield the CPU", j.spec.NP, lay.slots))
		} else {
			j.errOut.println(fmt.Sprintf("gorun: warning: %d ranks on %d slots (%s); hosts are oversubscribed", j.spec.NP, lay.slots, describeSlots(names, slots)))
		}
	}
	for _, s := range j.spec.Rankfile {
		if cpus := j.hosts[lay.ranks[s.Rank].host].cpus; s.CPU >= 0 && !slices.Contains(cpus, s.CPU) {
			return usagef("rankfile: rank %d on %s: slot=%d is not one of its usable CPUs (%v)", s.Rank, s.Host, s.CPU, cpus)
		}
	}
	if j.spec.DisplayMap {
		j.displayMap(slots)
	}
	if j.spec.ReportBindings {
		for r, pl := range lay.ranks {
			hs := j.hosts[pl.host]
			if set := j.cpusOf(r); set != nil {
				j.errOut.println(fmt.Sprintf("gorun: rank %d on %s bound to %s %s", r, hs.name, cpuList(set), bindMask(hs.cpus, set)))
			} else {
				j.errOut.println(fmt.Sprintf("gorun: rank %d on %s not bound", r, hs.name))
			}
		}
	}
	return nil
}

// displayMap prints, as --display-map, each host with how its entry was
// read (host:N is slots, never a port) and the ranks placed on it, with
// their program in an MPMD job.
func (j *job) displayMap(slots []int) {
	how := "--map-by " + cmp.Or(j.spec.MapBy, MapBySlot)
	if len(j.spec.Rankfile) > 0 {
		how = "--rankfile"
	}
	j.errOut.println(fmt.Sprintf("gorun: map of %d ranks on %d hosts (%s):", j.spec.NP, len(j.hosts), how))
	for i, hs := range j.hosts {
		var ranks []string
		for r, pl := range j.lay.ranks {
			if pl.host != i {
				continue
			}
			s := strconv.Itoa(r)
			if len(j.apps) > 1 {
				s += "=" + filepath.Base(j.progs[j.appOf[r]])
			}
			ranks = append(ranks, s)
		}
		entry := hs.spec.Entry
		if entry == "" {
			entry = "this host (no -H or hostfile)"
		}
		where := "here, no ssh"
		switch {
		case hs.here:
		case j.spec.Agents == AgentsSrun:
			where = "by srun"
		default:
			where = "over ssh"
		}
		j.errOut.println(fmt.Sprintf("gorun:   %s: %d slots, %s; from %s; ranks %s", hs.name, slots[i], where, entry, strings.Join(ranks, " ")))
	}
}

// pickMaster chooses MASTER_ADDR and MASTER_PORT, as torchrun sets them
// for torch.distributed's env:// rendezvous: rank 0's address, and a port
// that was free on it a moment ago (probed here when rank 0 runs on this
// host; on another host, a port free on this one, which a busy remote host
// may have taken: set MASTER_PORT with -x then). Values in gorun's
// environment or given with -x win.
func (j *job) pickMaster() {
	hs := j.hosts[j.lay.ranks[0].host]
	j.masterAddr = hs.addr
	probe := hs.addr
	if !hs.here {
		probe = ""
	}
	if l, err := net.Listen("tcp", net.JoinHostPort(probe, "0")); err == nil {
		_, j.masterPort, _ = net.SplitHostPort(l.Addr().String())
		l.Close()
	}
	j.trace("MASTER_ADDR=%s MASTER_PORT=%s", j.masterAddr, j.masterPort)
}

// cpusOf is the set of CPUs rank r is bound to, or nil (unbound).
func (j *job) cpusOf(r int) []int {
	pl := j.lay.ranks[r]
	cpus := j.hosts[pl.host].cpus
	if len(j.spec.Rankfile) > 0 && j.spec.Rankfile[r].CPU >= 0 {
		return []int{j.spec.Rankfile[r].CPU} // checked against the host's CPUs in place
	}
	if len(cpus) == 0 {
		return nil
	}
	switch j.spec.BindTo {
	case BindCore:
		return []int{cpus[pl.local%len(cpus)]}
	case "":
		return shareOf(cpus, j.lay.localSize[pl.host], pl.local)
	}
	return nil
}

// shareOf is the default binding of the local-th of n ranks on a host
// whose usable CPUs are cpus: its own block of len(cpus)/n of them (Open
// MPI's --map-by slot:PE=len(cpus)/n), so no two ranks share a core, or
// nil (unbound) when the ranks outnumber the CPUs. Unbound ranks at np =
// cores were 10-30x slower in small collectives on the lent 16-core host
// (two spinning ranks ended up sharing a core; coll/MEASUREMENTS.md). One
// CPU each while there are more (what Open MPI does) halved np=2's
// latency and message rate there (0.89 against 0.51 µs): a Go rank is
// several threads (its scheduler's, the collector's, the membership's)
// and they all had to take turns on the one core its busy-waiting rank
// held.
func shareOf(cpus []int, n, local int) []int {
	if n <= 0 || n > len(cpus) {
		return nil
	}
	k := len(cpus) / n
	return cpus[local*k : (local+1)*k]
}
