package hostinfo

import (
	"net"
	"strings"
	"testing"
)

func addr(iface, cidr string, up, loop bool) Addr {
	ip, n, _ := net.ParseCIDR(cidr)
	return Addr{iface: iface, ip: ip, net: n, up: up, loop: loop}
}

func TestInterfaceChoice(t *testing.T) {
	addrs := []Addr{
		addr("lo", "127.0.0.1/8", true, true),
		addr("docker0", "172.17.0.1/16", true, false),
		addr("virbr0", "192.168.122.1/24", true, false),
		addr("eth0", "fe80::1/64", true, false),
		addr("eth0", "2001:db8::5/64", true, false),
		addr("eth0", "10.1.2.3/24", true, false),
		addr("ib0", "10.9.0.7/16", true, false),
		addr("eth1", "10.5.0.1/24", false, false),
	}
	// The default never picks a bridge: the first real interface, IPv4 first.
	if got := DefaultAddr("", addrs).String(); got != "10.1.2.3" {
		t.Errorf("default: %s", got)
	}
	// The address ssh reached the host at wins when it is local.
	if got := DefaultAddr("10.9.0.7", addrs).String(); got != "10.9.0.7" {
		t.Errorf("via ssh: %s", got)
	}
	if got := DefaultAddr("10.99.0.1", addrs).String(); got != "10.1.2.3" {
		t.Errorf("via a foreign address: %s", got)
	}
	if got := DefaultAddr("", addrs[:3]).String(); got != "127.0.0.1" {
		t.Errorf("only bridges: %s", got)
	}
	for spec, want := range map[string]string{
		"ib0":            "10.9.0.7",
		"10.9.0.0/16":    "10.9.0.7",
		"docker0":        "172.17.0.1", // asked for explicitly
		"nope,eth0":      "10.1.2.3",
		"2001:db8::/32":  "2001:db8::5",
		"10.0.0.0/8,ib0": "10.1.2.3",
		"192.168.0.0/16": "192.168.122.1",
		"lo":             "127.0.0.1",
	} {
		ip, err := MatchIfInclude(spec, addrs)
		if err != nil || ip.String() != want {
			t.Errorf("--if-include %s: %v %v, want %s", spec, ip, err, want)
		}
	}
	for _, spec := range []string{"eth1", "10.77.0.0/24", "wlan0"} {
		if _, err := MatchIfInclude(spec, addrs); err == nil || !strings.Contains(err.Error(), "no interface matches") {
			t.Errorf("--if-include %s: %v", spec, err)
		}
	}
	for name, want := range map[string]bool{"docker0": true, "virbr0": true, "br-1a2b": true, "veth12": true, "eth0": false, "ib0": false, "enp3s0": false} {
		if got := isVirtualIface(name); got != want {
			t.Errorf("isVirtualIface(%s) = %v", name, got)
		}
	}
}
