package launcher

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sshconfig "github.com/kevinburke/ssh_config"
	"golang.org/x/crypto/ssh"
	sshagent "golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultConnectTimeout bounds the TCP connect and ssh handshake to one
// host when neither --connect-timeout nor the ssh config's ConnectTimeout
// says otherwise.
const DefaultConnectTimeout = 10 * time.Second

// sshSettings is the ssh configuration gorun honours: OpenSSH's files
// (~/.ssh/config then /etc/ssh/ssh_config, or only the --ssh-config file,
// as `ssh -F` does), the ssh-agent and known_hosts.
type sshSettings struct {
	files   []*sshconfig.Config
	timeout time.Duration // from the flag; 0: config or default
	home    string
	user    string

	mu      sync.Mutex
	signers map[string][]ssh.Signer // identity file -> its signer (or none)
	agentS  []ssh.Signer
	agentOK bool
	khMu    sync.Mutex // serializes known_hosts appends
}

func loadSSHSettings(file string, timeout time.Duration) (*sshSettings, error) {
	s := &sshSettings{timeout: timeout, signers: map[string][]ssh.Signer{}}
	s.home, _ = os.UserHomeDir()
	if u, err := user.Current(); err == nil {
		s.user = u.Username
	}
	paths := []string{filepath.Join(s.home, ".ssh", "config"), "/etc/ssh/ssh_config"}
	if file != "" {
		paths = []string{file}
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			if file == "" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("ssh config: %w", err)
		}
		c, err := sshconfig.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("ssh config %s: %w", p, err)
		}
		s.files = append(s.files, c)
	}
	return s, nil
}

func (s *sshSettings) get(alias, key string) string {
	for _, c := range s.files {
		if v, err := c.Get(alias, key); err == nil && v != "" {
			return v
		}
	}
	return ""
}

func (s *sshSettings) getAll(alias, key string) []string {
	for _, c := range s.files {
		if v, err := c.GetAll(alias, key); err == nil && len(v) > 0 {
			return v
		}
	}
	return nil
}

// sshTarget is one host as the ssh config resolves it.
type sshTarget struct {
	alias, hostname, port, user string
	identities                  []string
	identitiesOnly              bool
	knownHosts                  []string
	strict                      string
	timeout                     time.Duration
	jump                        string
}

func (t sshTarget) addr() string { return net.JoinHostPort(t.hostname, t.port) }

// resolve applies the config to name ([user@]alias[:port] for jump hosts).
func (s *sshSettings) resolve(name string) sshTarget {
	t := sshTarget{alias: name}
	if u, rest, ok := strings.Cut(name, "@"); ok {
		t.user, t.alias = u, rest
	}
	if h, p, err := net.SplitHostPort(t.alias); err == nil {
		t.alias, t.port = h, p
	}
	a := t.alias
	t.hostname = s.expand(s.get(a, "HostName"), t)
	if t.hostname == "" {
		t.hostname = a
	}
	if t.port == "" {
		t.port = s.get(a, "Port")
	}
	if t.port == "" {
		t.port = "22"
	}
	if t.user == "" {
		t.user = s.get(a, "User")
	}
	if t.user == "" {
		t.user = s.user
	}
	for _, f := range s.getAll(a, "IdentityFile") {
		t.identities = append(t.identities, s.expand(f, t))
	}
	if len(t.identities) == 0 {
		for _, f := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			t.identities = append(t.identities, filepath.Join(s.home, ".ssh", f))
		}
	}
	t.identitiesOnly = strings.EqualFold(s.get(a, "IdentitiesOnly"), "yes")
	kh := s.get(a, "UserKnownHostsFile")
	if kh == "" {
		kh = "~/.ssh/known_hosts ~/.ssh/known_hosts2"
	}
	gkh := s.get(a, "GlobalKnownHostsFile")
	if gkh == "" {
		gkh = "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2"
	}
	for _, f := range strings.Fields(kh + " " + gkh) {
		if f != "none" {
			t.knownHosts = append(t.knownHosts, s.expand(f, t))
		}
	}
	t.strict = strings.ToLower(s.get(a, "StrictHostKeyChecking"))
	t.timeout = s.timeout
	if t.timeout <= 0 {
		if n, err := strconv.Atoi(s.get(a, "ConnectTimeout")); err == nil && n > 0 {
			t.timeout = time.Duration(n) * time.Second
		}
	}
	if t.timeout <= 0 {
		t.timeout = DefaultConnectTimeout
	}
	if j := s.get(a, "ProxyJump"); j != "" && !strings.EqualFold(j, "none") {
		t.jump = j
	}
	return t
}

// expand replaces ~ and ssh_config's %d %u %h %r %p %% tokens.
func (s *sshSettings) expand(v string, t sshTarget) string {
	if v == "" {
		return v
	}
	if v == "~" || strings.HasPrefix(v, "~/") {
		v = s.home + v[1:]
	}
	if !strings.Contains(v, "%") {
		return v
	}
	host := t.hostname
	if host == "" {
		host = t.alias
	}
	r := strings.NewReplacer("%%", "%", "%d", s.home, "%u", s.user, "%h", host, "%r", t.user, "%p", t.port, "%n", t.alias)
	return r.Replace(v)
}

// authMethods returns the keys to offer: the identity files' and, unless
// IdentitiesOnly, the ssh-agent's. Keys with a passphrase are skipped
// (gorun cannot prompt); put them in the agent.
func (s *sshSettings) authMethods(t sshTarget) []ssh.AuthMethod {
	var signers []ssh.Signer
	if !t.identitiesOnly {
		signers = append(signers, s.agentSigners()...)
	}
	for _, f := range t.identities {
		signers = append(signers, s.fileSigner(f)...)
	}
	return []ssh.AuthMethod{ssh.PublicKeys(signers...)}
}

func (s *sshSettings) agentSigners() []ssh.Signer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agentOK {
		return s.agentS
	}
	s.agentOK = true
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return nil
	}
	s.agentS, _ = sshagent.NewClient(c).Signers()
	return s.agentS
}

func (s *sshSettings) fileSigner(path string) []ssh.Signer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sg, ok := s.signers[path]; ok {
		return sg
	}
	var sg []ssh.Signer
	if b, err := os.ReadFile(path); err == nil {
		if k, err := ssh.ParsePrivateKey(b); err == nil {
			sg = []ssh.Signer{k}
		}
	}
	s.signers[path] = sg
	return sg
}

// hostKeyAlgorithms lists the signature algorithms of a key type, so that
// the server is asked for the kind of key known_hosts holds.
func hostKeyAlgorithms(keyType string) []string {
	switch keyType {
	case ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	default:
		return []string{keyType}
	}
}

// errHostKey marks host key refusals (changed or unknown keys).
var errHostKey = errors.New("host key refused")

// hostKeyCheck builds the known_hosts check for t and the host key
// algorithms to ask for. A changed key is always refused; an unknown one
// is accepted and recorded only with StrictHostKeyChecking accept-new or
// no, as OpenSSH does (gorun never prompts).
//
// A refusal is also stored in *refused, so that it can be reported without
// the handshake's wrapping.
func (s *sshSettings) hostKeyCheck(t sshTarget, remote net.Addr, refused *error) (ssh.HostKeyCallback, []string, error) {
	var files []string
	for _, f := range t.knownHosts {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	var db ssh.HostKeyCallback
	if len(files) > 0 {
		var err error
		if db, err = knownhosts.New(files...); err != nil {
			return nil, nil, fmt.Errorf("known_hosts: %w", err)
		}
	}
	check := s.checkHostKey(t, db)
	var algos []string
	if db != nil {
		// Ask with a key that matches nothing: the error lists the known keys.
		var ke *knownhosts.KeyError
		if err := db(t.addr(), remote, probeKey()); errors.As(err, &ke) {
			seen := map[string]bool{}
			for _, k := range ke.Want {
				for _, a := range hostKeyAlgorithms(k.Key.Type()) {
					if !seen[a] {
						seen[a] = true
						algos = append(algos, a)
					}
				}
			}
		}
	}
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		if err != nil {
			*refused = err
		}
		return err
	}
	return cb, algos, nil
}

// checkHostKey applies known_hosts (db, nil when there is none) and the
// StrictHostKeyChecking policy to the key a host presents.
func (s *sshSettings) checkHostKey(t sshTarget, db ssh.HostKeyCallback) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		var err error
		if db != nil {
			err = db(hostname, remote, key)
		} else {
			err = &knownhosts.KeyError{}
		}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &re):
			return fmt.Errorf("%w: the host key of %s is revoked in %s:%d", errHostKey, t.alias, re.Revoked.Filename, re.Revoked.Line)
		case errors.As(err, &ke) && len(ke.Want) > 0:
			w := ke.Want[0]
			return fmt.Errorf("%w: the host key of %s (%s) has CHANGED: it presents %s %s but %s:%d holds %s; refusing to connect (someone may be intercepting the connection; if the host was reinstalled, remove the old key with: ssh-keygen -R %s -f %s)",
				errHostKey, t.alias, t.addr(), key.Type(), ssh.FingerprintSHA256(key), w.Filename, w.Line, ssh.FingerprintSHA256(w.Key), t.hostname, w.Filename)
		case errors.As(err, &ke):
			switch t.strict {
			case "no", "off", "accept-new":
				s.learnHostKey(t, key)
				return nil
			}
			return fmt.Errorf("%w: the host key of %s (%s, %s %s) is not in known_hosts (%s) and StrictHostKeyChecking is not accept-new; add it with: ssh-keyscan -p %s %s >> %s",
				errHostKey, t.alias, t.addr(), key.Type(), ssh.FingerprintSHA256(key), strings.Join(t.knownHosts, " "), t.port, t.hostname, firstOr(t.knownHosts, "~/.ssh/known_hosts"))
		default:
			return err
		}
	}
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// learnHostKey appends a newly accepted host key to the first user
// known_hosts file.
func (s *sshSettings) learnHostKey(t sshTarget, key ssh.PublicKey) {
	if len(t.knownHosts) == 0 {
		return
	}
	s.khMu.Lock()
	defer s.khMu.Unlock()
	f := t.knownHosts[0]
	os.MkdirAll(filepath.Dir(f), 0o700)
	fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer fh.Close()
	names := []string{knownhosts.Normalize(t.addr())}
	fmt.Fprintln(fh, knownhosts.Line(names, key))
}

var (
	probeOnce sync.Once
	probePub  ssh.PublicKey
)

// probeKey is a key no known_hosts file holds.
func probeKey() ssh.PublicKey {
	probeOnce.Do(func() {
		var b [32]byte
		for i := range b {
			b[i] = byte(i * 7)
		}
		probePub, _ = ssh.NewPublicKey(ed25519.PublicKey(b[:]))
	})
	return probePub
}

// dial connects and authenticates to name, through its ProxyJump hosts if
// any, all within the target's connect timeout. local is this host's
// address on the first hop's connection: an address the hosts can reach
// the launcher at.
func (s *sshSettings) dial(name string) (c *ssh.Client, t sshTarget, local net.IP, err error) {
	t = s.resolve(name)
	var hops []sshTarget
	if t.jump != "" {
		for _, j := range strings.Split(t.jump, ",") {
			hops = append(hops, s.resolve(strings.TrimSpace(j)))
		}
	}
	var via *ssh.Client
	for _, h := range append(hops, t) {
		c, err := s.dialOne(via, h, t.timeout)
		if err != nil {
			if via != nil {
				via.Close()
			}
			if h.alias != t.alias {
				err = fmt.Errorf("through jump host %s: %w", h.alias, err)
			}
			return nil, t, nil, err
		}
		if via == nil {
			if ta, ok := c.LocalAddr().(*net.TCPAddr); ok {
				local = ta.IP
			}
		}
		via = c
	}
	return via, t, local, nil
}

func (s *sshSettings) dialOne(via *ssh.Client, t sshTarget, timeout time.Duration) (*ssh.Client, error) {
	var conn net.Conn
	var err error
	if via == nil {
		conn, err = net.DialTimeout("tcp", t.addr(), timeout)
	} else {
		conn, err = dialWithin(via, t.addr(), timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t.addr(), err)
	}
	// A host that accepts but never answers (frozen) must not hang us.
	timedOut := false
	var tmu sync.Mutex
	timer := time.AfterFunc(timeout, func() { tmu.Lock(); timedOut = true; tmu.Unlock(); conn.Close() })
	var refused error
	hk, algos, err := s.hostKeyCheck(t, conn.RemoteAddr(), &refused)
	if err != nil {
		timer.Stop()
		conn.Close()
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:              t.user,
		Auth:              s.authMethods(t),
		HostKeyCallback:   hk,
		HostKeyAlgorithms: algos,
		Timeout:           timeout,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, t.addr(), cfg)
	timer.Stop()
	if err != nil {
		conn.Close()
		tmu.Lock()
		to := timedOut
		tmu.Unlock()
		if to {
			return nil, fmt.Errorf("ssh handshake with %s: no answer within %v", t.addr(), timeout)
		}
		if refused != nil {
			return nil, refused
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("ssh to %s@%s: authentication failed (tried the ssh-agent and %s): %w", t.user, t.addr(), strings.Join(t.identities, ", "), err)
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", t.addr(), err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// dialWithin opens a TCP connection through an ssh client, giving up after
// timeout.
func dialWithin(via *ssh.Client, addr string, timeout time.Duration) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := via.Dial("tcp", addr)
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-time.After(timeout):
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("no answer within %v", timeout)
	}
}
