package launcher

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestSSHConfigResolve(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`Host n1
  HostName 10.0.0.%h-x
  Port 2222
  User alice
  IdentityFile ~/keys/%r-%h
  IdentitiesOnly yes
  ProxyJump bastion

Host n2
  HostName n2.example
  StrictHostKeyChecking accept-new
  UserKnownHostsFile /k/one /k/two

Host *
  User bob
  ConnectTimeout 7
`), 0o600)
	s, err := loadSSHSettings(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.home = "/home/u"
	n1 := s.resolve("n1")
	if n1.hostname != "10.0.0.n1-x" || n1.port != "2222" || n1.user != "alice" || n1.jump != "bastion" || !n1.identitiesOnly || n1.timeout != 7*time.Second {
		t.Errorf("n1: %+v", n1)
	}
	if len(n1.identities) != 1 || n1.identities[0] != "/home/u/keys/alice-10.0.0.n1-x" {
		t.Errorf("n1 identities: %v", n1.identities)
	}
	n2 := s.resolve("carol@n2")
	if n2.hostname != "n2.example" || n2.port != "22" || n2.user != "carol" || n2.strict != "accept-new" || n2.knownHosts[0] != "/k/one" || n2.knownHosts[1] != "/k/two" {
		t.Errorf("n2: %+v", n2)
	}
	other := s.resolve("other")
	if other.hostname != "other" || other.user != "bob" || len(other.identities) != 3 {
		t.Errorf("other: %+v", other)
	}
	if s2, _ := loadSSHSettings(cfg, time.Second); s2.resolve("n1").timeout != time.Second {
		t.Error("--connect-timeout does not override ConnectTimeout")
	}
	if _, err := loadSSHSettings(filepath.Join(dir, "missing"), 0); err == nil {
		t.Error("a missing --ssh-config file is not an error")
	}
}

// sshServer is a minimal in-process ssh server on loopback that accepts
// one client key, for handshake tests.
func sshServer(t *testing.T, hostKey ssh.Signer, client ssh.PublicKey) string {
	t.Helper()
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(client.Marshal()) {
			return nil, nil
		}
		return nil, fmt.Errorf("unknown key")
	}}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					c.Close()
					return
				}
				go ssh.DiscardRequests(reqs)
				for ch := range chans {
					ch.Reject(ssh.Prohibited, "no")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func newKey(t *testing.T, dir, name string) (ssh.Signer, string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	os.WriteFile(p, pem.EncodeToMemory(blk), 0o600)
	return s, p
}

// TestSSHHostKeys: a known key connects, a changed key is refused with a
// clear message, an unknown key is refused unless accept-new (which
// records it), a host that does not answer fails within the timeout.
func TestSSHHostKeys(t *testing.T) {
	dir := t.TempDir()
	hostKey, _ := newKey(t, dir, "host")
	otherKey, _ := newKey(t, dir, "other")
	clientKey, clientFile := newKey(t, dir, "client")
	addr := sshServer(t, hostKey, clientKey.PublicKey())
	host, port, _ := net.SplitHostPort(addr)
	known := filepath.Join(dir, "known_hosts")
	line := func(k ssh.Signer) string {
		return fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.PublicKey()))))
	}
	dial := func(strict string) error {
		cfg := filepath.Join(dir, "config")
		os.WriteFile(cfg, []byte(fmt.Sprintf("Host srv\n  HostName %s\n  Port %s\n  User u\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking %s\n", host, port, clientFile, known, strict)), 0o600)
		s, err := loadSSHSettings(cfg, 5*time.Second)
		if err != nil {
			return err
		}
		c, _, _, err := s.dial("srv")
		if c != nil {
			c.Close()
		}
		return err
	}
	os.WriteFile(known, []byte(line(hostKey)+"\n"), 0o600)
	if err := dial("yes"); err != nil {
		t.Fatalf("known key: %v", err)
	}
	os.WriteFile(known, []byte(line(otherKey)+"\n"), 0o600)
	if err := dial("no"); err == nil || !strings.Contains(err.Error(), "has CHANGED") || !strings.Contains(err.Error(), known+":1") {
		t.Errorf("changed key: %v", err)
	}
	os.WriteFile(known, nil, 0o600)
	if err := dial("yes"); err == nil || !strings.Contains(err.Error(), "is not in known_hosts") {
		t.Errorf("unknown key, strict: %v", err)
	}
	if err := dial("accept-new"); err != nil {
		t.Errorf("unknown key, accept-new: %v", err)
	}
	if b, _ := os.ReadFile(known); !strings.Contains(string(b), strings.Fields(line(hostKey))[2]) {
		t.Errorf("accept-new did not record the key: %q", b)
	}
	if err := dial("yes"); err != nil {
		t.Errorf("recorded key: %v", err)
	}

	// A listener that never answers: the handshake gives up in time.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	s, _ := loadSSHSettings(filepath.Join(dir, "config"), 300*time.Millisecond)
	start := time.Now()
	_, _, _, err := s.dial("u@" + ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "no answer within") || time.Since(start) > 3*time.Second {
		t.Errorf("silent host: %v after %v", err, time.Since(start))
	}
}
