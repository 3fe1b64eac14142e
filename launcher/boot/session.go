package boot

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Session is a rank's membership in the job, from Join to Close.
type Session struct {
	env    *Env
	ml     *memberlist.Memberlist
	roster Roster

	mu     sync.Mutex
	onFail func(rank int, err error, declared bool)
	// failed: 1 when the failure detector declared the rank dead, 2 when
	// gorun did (recovery.go).
	failed   map[int]uint8
	rosterCh chan Roster
	closing  bool
	ft       ftState
}

// delegate receives memberlist callbacks. They run on memberlist's
// goroutines and must not block.
type delegate struct {
	s    *Session
	meta []byte
}

func (d *delegate) NodeMeta(limit int) []byte { return d.meta }
func (d *delegate) NotifyMsg(b []byte) {
	if m, ok, err := DecodeFT(b); ok {
		if err == nil {
			d.s.handleFT(m)
		}
		return
	}
	r, err := decodeRoster(b)
	if err != nil {
		return
	}
	select {
	case d.s.rosterCh <- r:
	default:
	}
}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node)   {}
func (d *delegate) NotifyUpdate(n *memberlist.Node) {}
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	// The name is a peer's: a rank out of range would index the
	// failure callback's tables out of bounds (mpi's peers[rank]).
	rank, ok := RankOfNode(n.Name, d.s.env.Size)
	if !ok {
		return
	}
	d.s.peerDead(rank, fmt.Errorf("rank %d (%s) was declared dead by the failure detector", rank, n.Address()))
}

func (s *Session) peerDead(rank int, err error) { s.peerFailed(rank, err, 1) }

// peerDeclared: gorun declared rank failed (recovery.go).
func (s *Session) peerDeclared(rank int, err error) { s.peerFailed(rank, err, 2) }

func (s *Session) peerFailed(rank int, err error, level uint8) {
	s.mu.Lock()
	if s.closing || s.failed[rank] >= level {
		s.mu.Unlock()
		return
	}
	s.failed[rank] = level
	f := s.onFail
	s.mu.Unlock()
	if f != nil {
		f(rank, err, level == 2)
	}
}

// bootTimeout is how long Join waits for the roster: the launcher ends a
// job whose ranks do not all join much sooner, so this only guards against
// a launcher that vanished.
func bootTimeout() time.Duration {
	if v, err := strconv.Atoi(os.Getenv(EnvBootWait)); err == nil && v > 0 {
		return time.Duration(v)*time.Second + 5*time.Second
	}
	return 5 * time.Minute
}

// Join publishes card, joins the job's membership and returns once the
// launcher has pushed the complete roster. A singleton returns at once with
// a roster of one.
func Join(env *Env, card Card) (*Session, error) {
	s := &Session{env: env, failed: map[int]uint8{}, rosterCh: make(chan Roster, 1)}
	if env.Singleton {
		s.roster = Roster{JobID: env.JobID, Cards: []Card{card}}
		return s, nil
	}
	meta, err := card.Encode()
	if err != nil {
		return nil, fmt.Errorf("boot: encode card: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("boot: business card of %d bytes exceeds memberlist's %d", len(meta), memberlist.MetaMaxSize)
	}
	bind := env.BindAddr
	if bind == "" {
		bind = "127.0.0.1"
	}
	d := &delegate{s: s, meta: meta}
	conf := MemberConfig(RankNode(env.Rank), bind, GossipKey(env.Secret), env.Size)
	conf.Delegate = d
	conf.Events = d
	ml, err := memberlist.Create(conf)
	if err != nil {
		return nil, fmt.Errorf("boot: rank %d: start membership: %w", env.Rank, err)
	}
	s.ml = ml
	if _, err := ml.Join([]string{env.Seed}); err != nil {
		ml.Shutdown()
		return nil, fmt.Errorf("boot: rank %d: join the launcher at %s: %w", env.Rank, env.Seed, err)
	}
	select {
	case r := <-s.rosterCh:
		if r.JobID != env.JobID || len(r.Cards) != env.Size {
			ml.Shutdown()
			return nil, fmt.Errorf("boot: rank %d: roster for job %q with %d cards, expected job %q with %d", env.Rank, r.JobID, len(r.Cards), env.JobID, env.Size)
		}
		s.roster = r
	case <-time.After(bootTimeout()):
		ml.Shutdown()
		return nil, fmt.Errorf("boot: rank %d: no roster from the launcher within %v", env.Rank, bootTimeout())
	}
	return s, nil
}

// Roster returns every rank's card.
func (s *Session) Roster() Roster { return s.roster }

// OnFailure registers f to be called (on a memberlist goroutine; it must not
// block) when a peer is declared dead: by the failure detector (declared
// false), then perhaps again by gorun (declared true: the launcher made
// sure the process is gone, recovery.go).
func (s *Session) OnFailure(f func(rank int, err error, declared bool)) {
	s.mu.Lock()
	s.onFail = f
	s.mu.Unlock()
}

// Finalized tells the launcher that this rank completed Finalize.
func (s *Session) Finalized() error {
	if s.env.ctl == nil {
		return nil
	}
	return s.env.ctl.write(CtlMsg{Kind: MsgFinalized})
}

// Abort asks the launcher to end the whole job with code; the caller exits
// right after. text, when set, says what ended the job where mpi.Abort
// did not (an error handler); gorun prints it instead of naming
// mpi.Abort.
func (s *Session) Abort(code int, text string) error {
	if s.env.ctl == nil {
		return nil
	}
	return s.env.ctl.write(CtlMsg{Kind: MsgAbort, Code: code, Text: text})
}

// Close leaves the membership without a goodbye (the launcher already
// knows from Finalized) and closes the control socket.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closing = true
	for k, ch := range s.ft.agrees {
		ch <- FTMsg{Kind: FTAgreed, Key: k, Text: closedText}
		delete(s.ft.agrees, k)
	}
	s.mu.Unlock()
	var err error
	if s.ml != nil {
		err = s.ml.Shutdown()
	}
	if s.env.ctl != nil {
		s.env.ctl.c.Close()
	}
	return err
}
