package tests

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The multi-host test bed: N network namespaces ("hosts") on one bridge,
// each with its own sshd (own host key, own UTS hostname h1..hN), reached
// with a private ssh config. Traffic only ever goes to these namespaces'
// addresses (nsNet.0/24) and loopback: the namespaces have no default
// route. The last host may get a private /tmp, so that programs and gorun
// itself (built under /tmp) are missing there and must be copied.
//
// Concurrent `go test` runs on one machine take turns through a lock
// file, since they would share names and the subnet.

const (
	nsNet    = "10.77.0"
	nsPrefix = "gorun-h" // namespace gorun-h1 ...
	nsBridge = "gorun-br0"
	nsVeth   = "gorun-v" // root side of host i's veth: gorun-v1 ...
	nsLock   = "/run/gorun-netns.lock"
)

// netHosts is a running test bed.
type netHosts struct {
	n      int
	priv   bool   // the last host has a private /tmp
	dir    string // state: keys, configs, logs (under /var/tmp: h4's /tmp is private)
	config string // ssh config for gorun --ssh-config and ssh -F
	known  string // its known_hosts
	sshd   []*exec.Cmd
	lock   *os.File
}

func (nh *netHosts) name(i int) string { return fmt.Sprintf("h%d", i) } // ssh alias and hostname
func (nh *netHosts) ns(i int) string   { return fmt.Sprintf("%s%d", nsPrefix, i) }
func (nh *netHosts) ip(i int) string   { return fmt.Sprintf("%s.%d", nsNet, i) }

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// netnsUnavailable says why the test bed cannot be built here, or "".
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "multi-host tests need root (network namespaces, sshd)"
	}
	for _, p := range []string{"ip", "nft", "ssh-keygen", "ssh", "unshare", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Sprintf("multi-host tests need %s (.ci/run installs iproute2, nftables, openssh-client, util-linux)", p)
		}
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		return "multi-host tests need /usr/sbin/sshd (apt-get install openssh-server)"
	}
	if err := runCmd("ip", "netns", "list"); err != nil {
		return "ip netns is unavailable: " + err.Error()
	}
	return ""
}

// needNetHosts builds the test bed of n hosts for t (and its subtests) or
// skips; under CI=true it fails instead of skipping. With privTmp the last
// host gets a private /tmp.
func needNetHosts(t *testing.T, n int, privTmp bool) *netHosts {
	t.Helper()
	if why := netnsUnavailable(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", why)
		}
		t.Skip(why)
	}
	nh, err := startNetHosts(n, privTmp)
	if err != nil {
		t.Fatalf("multi-host test bed: %v", err)
	}
	// Interrupted (Ctrl-C, a killed CI step): still leave nothing behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	stopped := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "multi-host test bed: %v; tearing down\n", s)
			nh.stop()
			os.Exit(2)
		case <-stopped:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sigs)
		close(stopped)
		nh.stop()
	})
	return nh
}

func startNetHosts(n int, privTmp bool) (nh *netHosts, err error) {
	nh = &netHosts{n: n, priv: privTmp}
	lock, err := os.OpenFile(nsLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	nh.lock = lock
	// Another package run may hold the bed: wait for it, boundedly.
	deadline := time.Now().Add(4 * time.Minute)
	for syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			lock.Close()
			return nil, fmt.Errorf("%s is held by another test run for 4 minutes", nsLock)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer func() {
		if err != nil {
			nh.stop()
		}
	}()
	nh.removeLeftovers()
	if nh.dir, err = os.MkdirTemp("/var/tmp", "gorun-netns-"); err != nil {
		return nh, err
	}
	steps := [][]string{
		{"ip", "link", "add", nsBridge, "type", "bridge"},
		{"ip", "link", "set", nsBridge, "up"},
		{"ip", "addr", "add", nsNet + ".254/24", "dev", nsBridge},
	}
	for i := 1; i <= n; i++ {
		ns, v := nh.ns(i), fmt.Sprintf("%s%d", nsVeth, i)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", v, "master", nsBridge, "up"},
			[]string{"ip", "-n", ns, "addr", "add", nh.ip(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := runCmd(s[0], s[1:]...); err != nil {
			return nh, err
		}
	}
	if err := nh.startSSHD(); err != nil {
		return nh, err
	}
	return nh, nil
}

func (nh *netHosts) startSSHD() error {
	sshDir := filepath.Join(nh.dir, "ssh")
	os.MkdirAll(sshDir, 0o700)
	os.MkdirAll("/run/sshd", 0o755)
	key := filepath.Join(sshDir, "id_ed25519")
	if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gorun-test-client", "-f", key); err != nil {
		return err
	}
	pub, _ := os.ReadFile(key + ".pub")
	auth := filepath.Join(sshDir, "authorized_keys")
	os.WriteFile(auth, pub, 0o600)
	nh.known = filepath.Join(sshDir, "known_hosts")
	var known, cfg bytes.Buffer
	for i := 1; i <= nh.n; i++ {
		hd := filepath.Join(nh.dir, nh.name(i))
		os.MkdirAll(hd, 0o700)
		hk := filepath.Join(hd, "ssh_host_ed25519_key")
		if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", nh.name(i)+"-hostkey", "-f", hk); err != nil {
			return err
		}
		hpub, _ := os.ReadFile(hk + ".pub")
		f := strings.Fields(string(hpub))
		fmt.Fprintf(&known, "%s %s %s\n", nh.ip(i), f[0], f[1])
		conf := fmt.Sprintf(`Port 22
ListenAddress %s
HostKey %s
PidFile %s/sshd.pid
AuthorizedKeysFile %s
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
MaxStartups 100:30:200
MaxSessions 100
PrintMotd no
AcceptEnv LANG LC_* SHLVL
Subsystem sftp /usr/lib/openssh/sftp-server
`, nh.ip(i), hk, hd, auth)
		cf := filepath.Join(hd, "sshd_config")
		os.WriteFile(cf, []byte(conf), 0o600)
		if err := runCmd("/usr/sbin/sshd", "-t", "-f", cf); err != nil {
			return err
		}
		// Own UTS namespace: `hostname` says hI. The last host also gets
		// a private /tmp, where nothing of ours exists.
		inner := fmt.Sprintf("hostname %s && exec /usr/sbin/sshd -D -f %s -E %s/sshd.log", nh.name(i), cf, hd)
		args := []string{"netns", "exec", nh.ns(i), "unshare", "--uts"}
		if i == nh.n && nh.priv {
			args = append(args, "--mount")
			inner = "mount -t tmpfs -o mode=1777 tmpfs /tmp && " + inner
		}
		args = append(args, "--", "sh", "-c", inner)
		c := exec.Command("ip", args...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return err
		}
		nh.sshd = append(nh.sshd, c)
	}
	for i := 1; i <= nh.n; i++ {
		fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n", nh.name(i), nh.ip(i))
	}
	// h2j reaches h2 through h1 (ProxyJump).
	fmt.Fprintf(&cfg, "Host h2j\n  HostName %s\n  ProxyJump h1\n", nh.ip(2))
	fmt.Fprintf(&cfg, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking yes\n  UserKnownHostsFile %s\n  ConnectTimeout 3\n  SetEnv SHLVL=1\n", key, nh.known)
	os.WriteFile(nh.known, known.Bytes(), 0o600)
	nh.config = filepath.Join(sshDir, "config")
	os.WriteFile(nh.config, cfg.Bytes(), 0o600)
	deadline := time.Now().Add(10 * time.Second)
	for i := 1; i <= nh.n; i++ {
		for {
			c, err := net.DialTimeout("tcp", nh.ip(i)+":22", 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(nh.dir, nh.name(i), "sshd.log"))
				return fmt.Errorf("sshd on %s does not listen: %v\n%s", nh.name(i), err, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// pids lists the processes in host i's namespace.
func (nh *netHosts) pids(i int) []int {
	out, _ := exec.Command("ip", "netns", "pids", nh.ns(i)).Output()
	var ps []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func procCmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func procZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

// leftovers lists what runs in the hosts besides sshd (the listener and
// its per-connection processes) and the shells that start it.
func (nh *netHosts) leftovers() []string {
	var left []string
	for i := 1; i <= nh.n; i++ {
		for _, p := range nh.pids(i) {
			c := procComm(p)
			if c == "sshd" || c == "unshare" || procZombie(p) {
				continue
			}
			left = append(left, fmt.Sprintf("%s: pid %d %s", nh.name(i), p, procCmdline(p)))
		}
	}
	return left
}

// checkNothingLeftOnHosts waits (boundedly) until no process of ours runs
// on any host.
func (nh *netHosts) checkNothingLeftOnHosts(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := nh.leftovers()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left running %v after the job ended:\n%s", within, strings.Join(left, "\n"))
			for _, l := range left {
				var pid int
				fmt.Sscanf(l[strings.Index(l, "pid ")+4:], "%d", &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeze stops (or, with cont, resumes) every process of host i.
func (nh *netHosts) freeze(i int, cont bool) {
	sig := syscall.SIGSTOP
	if cont {
		sig = syscall.SIGCONT
	}
	for _, p := range nh.pids(i) {
		syscall.Kill(p, sig)
	}
}

// isolate cuts host i off the network (or reconnects it) with nft rules
// inside its namespace: nothing in or out of eth0.
func (nh *netHosts) isolate(i int, on bool) error {
	if !on {
		return runCmd("ip", "netns", "exec", nh.ns(i), "nft", "delete", "table", "inet", "gorun_iso")
	}
	rules := `table inet gorun_iso {
  chain in { type filter hook input priority -20; policy accept; iifname "eth0" drop; }
  chain out { type filter hook output priority -20; policy accept; oifname "eth0" drop; }
}`
	c := exec.Command("ip", "netns", "exec", nh.ns(i), "nft", "-f", "-")
	c.Stdin = strings.NewReader(rules)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s", err, out)
	}
	return nil
}

// findProc returns the first process on host i whose command line
// contains s.
func (nh *netHosts) findProc(i int, s string) int {
	for _, p := range nh.pids(i) {
		if procComm(p) != "sshd" && strings.Contains(procCmdline(p), s) {
			return p
		}
	}
	return 0
}

// stop tears the bed down: sshds (by pid) and anything left in the
// namespaces, the namespaces, the bridge, the state directory, the lock.
func (nh *netHosts) stop() {
	for _, c := range nh.sshd {
		syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
	for _, c := range nh.sshd {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	nh.removeLeftovers()
	if nh.dir != "" {
		os.RemoveAll(nh.dir)
	}
	if nh.lock != nil {
		nh.lock.Close()
	}
}

// removeLeftovers deletes what a test bed (this one, or one of a run that
// was killed) left: processes in our namespaces, the namespaces, the
// bridge. It runs with the lock held.
func (nh *netHosts) removeLeftovers() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		if ps, _ := exec.Command("ip", "netns", "pids", f[0]).Output(); len(ps) > 0 {
			for _, p := range strings.Fields(string(ps)) {
				if pid, err := strconv.Atoi(p); err == nil {
					syscall.Kill(pid, syscall.SIGCONT)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		runCmd("ip", "netns", "del", f[0])
	}
	// The root side of each host's veth goes with its namespace, but
	// later (the kernel frees a namespace asynchronously, once its last
	// process is gone): a bed set up right after another's teardown found
	// gorun-v1 still there ("File exists"). Deleting a veth's end takes
	// both at once.
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		// "7: gorun-v1@if2: <BROADCAST,..."
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], nsVeth) {
			runCmd("ip", "link", "del", strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	runCmd("ip", "link", "del", nsBridge)
	stale, _ := filepath.Glob("/var/tmp/gorun-netns-*")
	for _, d := range stale {
		if d != nh.dir {
			os.RemoveAll(d)
		}
	}
}
