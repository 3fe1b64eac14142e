package launcher

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gorun/gorun/launcher/boot"
	"github.com/hashicorp/memberlist"
)

// seed is the launcher's memberlist node: every rank joins it, and its
// events tell the launcher who has joined (with which card) and who was
// declared dead.
type seed struct {
	ml     *memberlist.Memberlist
	events chan<- event
	jobID  string
	size   int

	mu    sync.Mutex
	nodes map[int]*memberlist.Node

	// Events from memberlist's callbacks wait in queue until forward
	// hands them to the loop: memberlist forbids its callbacks to block
	// (delegate.go), and the loop may be busy, its channel full, or gone.
	qmu   sync.Mutex
	queue []event
	wake  chan struct{} // capacity 1: "the queue has something"
	stop  chan struct{} // closed by close
}

// post queues ev for the loop without blocking.
func (s *seed) post(ev event) {
	s.qmu.Lock()
	s.queue = append(s.queue, ev)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// forward moves queued events to the loop, in order, until close.
func (s *seed) forward() {
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
		s.qmu.Lock()
		q := s.queue
		s.queue = nil
		s.qmu.Unlock()
		for _, ev := range q {
			select {
			case s.events <- ev:
			case <-s.stop:
				return
			}
		}
	}
}

func startSeed(bind string, secret []byte, jobID string, size int, events chan<- event) (*seed, error) {
	s := &seed{events: events, jobID: jobID, size: size, nodes: map[int]*memberlist.Node{},
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	go s.forward()
	conf := boot.MemberConfig(boot.LauncherNode, bind, boot.GossipKey(secret), size)
	conf.Events = s
	conf.Delegate = s
	ml, err := memberlist.Create(conf)
	if err != nil {
		close(s.stop)
		return nil, fmt.Errorf("start the membership seed on %s: %w", bind, err)
	}
	s.ml = ml
	return s, nil
}

// Addr is the seed's host:port, handed to the ranks.
func (s *seed) Addr() string {
	n := s.ml.LocalNode()
	return n.Address()
}

// rankOf is the rank of a member's node, within the job's size.
func (s *seed) rankOf(n *memberlist.Node) (int, bool) { return boot.RankOfNode(n.Name, s.size) }

// NotifyJoin runs on a memberlist goroutine.
func (s *seed) NotifyJoin(n *memberlist.Node) {
	r, ok := s.rankOf(n)
	if !ok {
		return
	}
	card, err := boot.DecodeCard(n.Meta)
	if err != nil || card.Rank != r {
		s.post(event{kind: evBadJoin, rank: r, err: fmt.Errorf("rank %d joined with an unreadable business card: %v", r, err)})
		return
	}
	s.mu.Lock()
	s.nodes[r] = n
	s.mu.Unlock()
	s.post(event{kind: evJoined, rank: r, card: card})
}

func (s *seed) NotifyLeave(n *memberlist.Node) {
	if r, ok := s.rankOf(n); ok {
		s.post(event{kind: evDead, rank: r, err: fmt.Errorf("declared dead by the failure detector (last address %s)", n.Address())})
	}
}

func (s *seed) NotifyUpdate(n *memberlist.Node) {}

func (s *seed) NodeMeta(limit int) []byte { return nil }

// NotifyMsg receives the ranks' recovery messages (recovery.go).
func (s *seed) NotifyMsg(b []byte) {
	if m, ok, err := boot.DecodeFT(b); ok && err == nil {
		s.post(event{kind: evFT, ft: m})
	}
}

// sendFT sends m to rank in the background (the loop must not wait on a
// TCP connect); a rank that cannot be reached is or will be lost.
func (s *seed) sendFT(rank int, m boot.FTMsg) {
	s.mu.Lock()
	n := s.nodes[rank]
	s.mu.Unlock()
	b, err := boot.EncodeFT(m)
	if n == nil || err != nil {
		return
	}
	go s.ml.SendReliable(n, b)
}
func (s *seed) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (s *seed) LocalState(join bool) []byte                { return nil }
func (s *seed) MergeRemoteState(buf []byte, join bool)     {}

// pushRoster sends the complete roster to every rank, in parallel.
func (s *seed) pushRoster(cards []boot.Card) error {
	msg, err := boot.EncodeRoster(boot.Roster{JobID: s.jobID, Cards: cards})
	if err != nil {
		return err
	}
	s.mu.Lock()
	nodes := make([]*memberlist.Node, s.size)
	for r, n := range s.nodes {
		nodes[r] = n
	}
	s.mu.Unlock()
	errs := make([]error, s.size)
	var wg sync.WaitGroup
	for r, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = s.ml.SendReliable(n, msg)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("push the roster to rank %d: %w", r, err)
		}
	}
	return nil
}

// suspects lists the ranks the failure detector currently suspects (or
// has declared dead) as the seed sees them.
func (s *seed) suspects() []int {
	// Members takes memberlist's node lock, under which it calls
	// NotifyJoin, which takes s.mu: never the other way round.
	alive := map[string]memberlist.NodeStateType{}
	for _, n := range s.ml.Members() {
		alive[n.Name] = n.State
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rs []int
	for r, n := range s.nodes {
		if st, ok := alive[n.Name]; !ok || st != memberlist.StateAlive {
			rs = append(rs, r)
		}
	}
	sort.Ints(rs)
	return rs
}

func (s *seed) close() {
	close(s.stop)
	done := make(chan struct{})
	go func() { s.ml.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}
