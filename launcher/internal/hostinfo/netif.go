package hostinfo

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// virtualPrefixes name interfaces that are never picked by default: the
// bridges and tunnels of containers and VMs (docker0, virbr0, ...), whose
// addresses other hosts cannot reach. Picking docker0 is a classic Open MPI
// and Gloo hang.
var virtualPrefixes = []string{"docker", "virbr", "br-", "veth", "lxcbr", "lxdbr", "cni", "flannel", "cali", "vxlan", "vmnet", "vboxnet", "podman", "kube", "weave", "tun", "tap", "zt", "tailscale", "wg"}

// isVirtualIface reports whether an interface is a container or VM bridge
// or tunnel (by name, or because the kernel says it is a bridge).
func isVirtualIface(name string) bool {
	for _, p := range virtualPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	_, err := os.Stat("/sys/class/net/" + name + "/bridge")
	return err == nil
}

// Addr is one address of one interface (Addrs).
type Addr struct {
	iface string
	ip    net.IP
	net   *net.IPNet
	up    bool
	loop  bool
}

// Addrs lists the addresses of this host's interfaces.
func Addrs() []Addr {
	var out []Addr
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			out = append(out, Addr{iface: ifc.Name, ip: n.IP, net: n, up: ifc.Flags&net.FlagUp != 0, loop: ifc.Flags&net.FlagLoopback != 0})
		}
	}
	return out
}

// MatchIfInclude returns the first address of addrs selected by spec, a
// comma-separated list of interface names and CIDR blocks (--if-include).
// IPv4 is preferred over IPv6; link-local IPv6 is never used.
func MatchIfInclude(spec string, addrs []Addr) (net.IP, error) {
	var best net.IP
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		_, cidr, cerr := net.ParseCIDR(item)
		for _, a := range addrs {
			if !a.up || a.ip.IsLinkLocalUnicast() {
				continue
			}
			if (cerr == nil && cidr.Contains(a.ip)) || (cerr != nil && a.iface == item) {
				if a.ip.To4() != nil {
					return a.ip, nil
				}
				if best == nil {
					best = a.ip
				}
			}
		}
	}
	if best != nil {
		return best, nil
	}
	var have []string
	for _, a := range addrs {
		have = append(have, a.iface+" "+a.net.String())
	}
	return nil, fmt.Errorf("no interface matches --if-include %q (interfaces: %s)", spec, strings.Join(have, ", "))
}

// DefaultAddr picks the address ranks listen on when --if-include is not
// given: the address this host was reached at (viaIP, from the ssh
// connection, known to route to the launcher) when it is local, else the
// first address of an up, non-loopback, non-virtual interface, IPv4 first,
// else loopback.
func DefaultAddr(viaIP string, addrs []Addr) net.IP {
	if ip := net.ParseIP(viaIP); ip != nil {
		for _, a := range addrs {
			if a.ip.Equal(ip) {
				return ip
			}
		}
	}
	var v6 net.IP
	for _, a := range addrs {
		if !a.up || a.loop || a.ip.IsLinkLocalUnicast() || isVirtualIface(a.iface) {
			continue
		}
		if a.ip.To4() != nil {
			return a.ip
		}
		if v6 == nil {
			v6 = a.ip
		}
	}
	if v6 != nil {
		return v6
	}
	return net.IPv4(127, 0, 0, 1)
}
