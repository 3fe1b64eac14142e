package boot

import (
	"io"
	"log"
	"math"
	"os"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/hashicorp/memberlist"
)

var (
	pProbe = params.PositiveDuration("GORUN_MEMBER_PROBE", 200*time.Millisecond,
		"memberlist probe interval: how often each node checks one random peer (failure detection)")
	pProbeTimeout = params.PositiveDuration("GORUN_MEMBER_PROBE_TIMEOUT", 100*time.Millisecond,
		"memberlist probe timeout before indirect probes")
	pSuspicion = params.PositiveDuration("GORUN_MEMBER_SUSPICION", 2400*time.Millisecond,
		"how long a member that stopped answering probes has to refute the suspicion before it is declared dead: longer than the pauses a live rank must survive (2 s), shorter than the bound on finding a dead host (3 s)")
)

// MemberConfig returns the memberlist configuration shared by the launcher
// and the ranks of a job of size ranks: encrypted with key, bound to
// bindAddr on a kernel-chosen port, and tuned for a LAN.
//
// The detector's bound (docs/measurements.md, "Failure detection"): a
// member that stops answering is suspected within about two probe
// intervals and declared dead GORUN_MEMBER_SUSPICION (2.4 s) later, so a
// live rank or host paused for 2 s (a long GC pause, a stalled VM, a
// loaded node) refutes the suspicion in time and is not declared dead,
// while a dead host is declared dead within about 2.8 s. A killed rank is
// found much sooner by other means: its agent or gorun sees the process
// end, and the transports see its connections close.
func MemberConfig(name, bindAddr string, key []byte, size int) *memberlist.Config {
	c := memberlist.DefaultLocalConfig()
	c.Name = name
	c.BindAddr = bindAddr
	c.BindPort = 0
	c.AdvertiseAddr = bindAddr
	c.SecretKey = key
	c.ProbeInterval = pProbe()
	c.ProbeTimeout = pProbeTimeout()
	c.SuspicionMult, c.SuspicionMaxTimeoutMult = suspicionMult(pSuspicion(), c.ProbeInterval, size+1), 1
	c.GossipInterval = 50 * time.Millisecond
	c.TCPTimeout = 2 * time.Second
	// Gossip between ranks is a few small packets on a LAN: compressing
	// them (LZW) only cost a 20 KB writer per message, the garbage that
	// the ranks' collections then spent time on while they wait in
	// microsecond-scale collectives.
	c.EnableCompression = false
	c.DeadNodeReclaimTime = time.Second
	if params.Debug() {
		c.Logger = log.New(os.Stderr, "gorun: "+name+": ", log.Lmicroseconds)
	} else {
		c.LogOutput = io.Discard
	}
	return c
}

// suspicionMult is memberlist's suspicion multiplier that makes its
// suspicion timeout, mult*max(1, log10(members))*probe (memberlist's
// suspicionTimeout), about want for a membership of members nodes. With
// the maximum multiplier at 1 the timeout is that, whatever number of
// confirmations arrive: a suspect is never declared dead sooner because
// more members agree (they all see the same pause).
func suspicionMult(want, probe time.Duration, members int) int {
	scale := math.Max(1, math.Log10(float64(max(1, members))))
	m := int(math.Round(float64(want) / (scale * float64(probe))))
	return max(1, m)
}
