package coll

// Sub-channels of the levels of a hierarchical algorithm: a node, its
// leaders, and a rail (the ranks of one index within their node on every
// node: gpuhier.go). Taken elsewhere: 3-6 by the intercommunicator
// algorithms (inter.go), 31 by subNotify; sub replaces the channel of the
// view it is called on, so two numbers meet only within one call.
const (
	chLocal   = 1
	chLeaders = 2
	chRail    = 7
)

// hierComms are the two levels of a hierarchical algorithm: the ranks of
// this rank's node, led by local rank 0, and the nodes' leaders. The
// root's node is led by the root; other nodes by their lowest rank.
type hierComms struct {
	local   *Comm
	leaders *Comm // nil unless this rank leads its node
	// rootLeader is the root's node's index in leaders.
	rootLeader int
}

// hier splits c by node for a collective rooted at root.
func (c *Comm) hier(root int) hierComms {
	n := c.Size()
	lead := make([]int, c.Nodes)
	for k := range lead {
		lead[k] = -1
	}
	for r := 0; r < n; r++ {
		if k := c.Node[r]; lead[k] < 0 {
			lead[k] = r
		}
	}
	lead[c.Node[root]] = root
	mine := c.Node[c.Me]
	local := []int{lead[mine]}
	for r := 0; r < n; r++ {
		if c.Node[r] == mine && r != lead[mine] {
			local = append(local, r)
		}
	}
	h := hierComms{local: c.sub(local, chLocal), rootLeader: c.Node[root]}
	if lead[mine] == c.Me {
		h.leaders = c.sub(lead, chLeaders)
	}
	return h
}

// multiNode reports whether c spans several nodes with several ranks on
// at least one of them: the case the hierarchical algorithms are for.
func (c *Comm) multiNode() bool {
	return c.Nodes > 1 && c.Nodes < c.Size()
}
