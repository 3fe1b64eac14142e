package boot

import (
	"io"
	"log"
	"os"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/hashicorp/memberlist"
)

var (
	pProbe = params.Duration("GORUN_MEMBER_PROBE", 200*time.Millisecond,
		"memberlist probe interval: how often each node checks one random peer (failure detection)")
	pProbeTimeout = params.Duration("GORUN_MEMBER_PROBE_TIMEOUT", 100*time.Millisecond,
		"memberlist probe timeout before indirect probes")
	pSuspicion = params.Int("GORUN_MEMBER_SUSPICION_MULT", 2,
		"memberlist suspicion multiplier: a suspect is declared dead after about mult*log10(N+1)*probe interval")
	pDebug = params.Int("GORUN_DEBUG", 0, "1 prints memberlist and wire-up logs on stderr")
)

// MemberConfig returns the memberlist configuration shared by the launcher
// and the ranks: encrypted with key, bound to bindAddr on a kernel-chosen
// port, and tuned for fast failure detection on a LAN (the defaults take
// several seconds to declare a node dead; a killed node was declared dead
// in about 0.5 s with these).
func MemberConfig(name, bindAddr string, key []byte) *memberlist.Config {
	c := memberlist.DefaultLocalConfig()
	c.Name = name
	c.BindAddr = bindAddr
	c.BindPort = 0
	c.AdvertiseAddr = bindAddr
	c.SecretKey = key
	c.ProbeInterval = pProbe()
	c.ProbeTimeout = pProbeTimeout()
	c.SuspicionMult = pSuspicion()
	c.GossipInterval = 50 * time.Millisecond
	c.TCPTimeout = 2 * time.Second
	c.DeadNodeReclaimTime = time.Second
	if pDebug() == 1 {
		c.Logger = log.New(os.Stderr, "gorun: "+name+": ", log.Lmicroseconds)
	} else {
		c.LogOutput = io.Discard
	}
	return c
}
