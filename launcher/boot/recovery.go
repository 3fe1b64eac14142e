package boot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// Recovery (gorun --enable-recovery): a failed rank does not end the job;
// the survivors learn of it and may go on (ULFM: package mpi's Revoke,
// Shrink and Agree). The launcher is the authority on which ranks failed:
// it declares a rank failed once (its process exited without Finalize, was
// killed, stopped, or the failure detector gave up on it), makes sure a
// local one is dead (SIGKILL), and tells every live rank. It also runs
// the job's agreements: each member of a communicator sends its words,
// and the launcher answers every live member with their bitwise and over
// the members that have not failed, and the failed members, once every
// member has either contributed or been declared failed. Every rank gets
// the same answer, so the agreement is uniform; the launcher is a single
// point of failure, but so it is for the whole job already (when gorun
// dies, every rank is killed).
//
// The messages travel as memberlist user messages (reliable, over TCP,
// encrypted with the job's gossip key) between the ranks and the
// launcher's node, so they reach ranks on every host without the agents.

// Kinds of FTMsg.
const (
	FTAgree      = 'A' // rank -> launcher: Key, Rank, Members, Words
	FTAgreed     = 'a' // launcher -> rank: Key, Words, Failed
	FTRevoke     = 'V' // rank -> launcher: Ctx, Rank, Members
	FTRevoked    = 'v' // launcher -> rank: Ctx
	FTFailed     = 'F' // launcher -> rank: Rank failed, Text says how
	ftTag        = 'F' // first byte of an FTMsg on the wire (rosterTag is 'R')
	maxFTMembers = 1 << 20
)

// FTMsg is one message of the recovery protocol.
type FTMsg struct {
	Kind    byte     `msgpack:"k"`
	Key     string   `msgpack:"y,omitempty"`
	Rank    int      `msgpack:"r"`
	Ctx     uint32   `msgpack:"c,omitempty"`
	Members []int    `msgpack:"m,omitempty"`
	Words   []uint64 `msgpack:"w,omitempty"`
	Failed  []int    `msgpack:"f,omitempty"`
	Text    string   `msgpack:"t,omitempty"`
}

// EncodeFT encodes m for the wire.
func EncodeFT(m FTMsg) ([]byte, error) {
	b, err := msgpack.Marshal(&m)
	if err != nil {
		return nil, err
	}
	return append([]byte{ftTag}, b...), nil
}

// DecodeFT decodes a message of the recovery protocol; ok is false when b
// is not one (another kind of user message).
func DecodeFT(b []byte) (m FTMsg, ok bool, err error) {
	if len(b) == 0 || b[0] != ftTag {
		return m, false, nil
	}
	if err := checkShape(b[1:]); err != nil {
		return m, true, fmt.Errorf("bad recovery message: %w", err)
	}
	if err := msgpack.Unmarshal(b[1:], &m); err != nil {
		return m, true, fmt.Errorf("bad recovery message: %w", err)
	}
	switch m.Kind {
	case FTAgree, FTAgreed, FTRevoke, FTRevoked, FTFailed:
	default:
		return m, true, fmt.Errorf("bad recovery message: kind %q", m.Kind)
	}
	if len(m.Members) > maxFTMembers || len(m.Failed) > maxFTMembers {
		return m, true, fmt.Errorf("bad recovery message: %d members", len(m.Members))
	}
	return m, true, nil
}

// closedText marks the answer Close gives a waiting Agree.
const closedText = "session closed"

// ErrNoRecovery: the job does not run with gorun --enable-recovery.
var ErrNoRecovery = errors.New("the job does not run with gorun --enable-recovery")

// ftState is a Session's side of the protocol.
type ftState struct {
	agrees   map[string]chan FTMsg
	onRevoke func(ctx uint32)
}

// handleFT handles a message from the launcher; it runs on a memberlist
// goroutine and must not block.
func (s *Session) handleFT(m FTMsg) {
	switch m.Kind {
	case FTFailed:
		// The text is gorun's line, which begins "gorun: " already.
		s.peerDeclared(m.Rank, fmt.Errorf("rank %d failed (gorun: %s)", m.Rank, strings.TrimPrefix(m.Text, "gorun: ")))
	case FTRevoked:
		s.mu.Lock()
		f := s.ft.onRevoke
		s.mu.Unlock()
		if f != nil {
			f(m.Ctx)
		}
	case FTAgreed:
		s.mu.Lock()
		ch := s.ft.agrees[m.Key]
		delete(s.ft.agrees, m.Key)
		s.mu.Unlock()
		if ch != nil {
			ch <- m // capacity 1, one answer per key
		}
	}
}

// OnRevoke registers f to be called (on a memberlist goroutine; it must
// not block) when another rank revokes a communicator with context ctx.
func (s *Session) OnRevoke(f func(ctx uint32)) {
	s.mu.Lock()
	s.ft.onRevoke = f
	s.mu.Unlock()
}

// launcher returns the launcher's memberlist node.
func (s *Session) launcher() (*memberlist.Node, error) {
	if s.ml == nil {
		return nil, ErrNoRecovery
	}
	for _, n := range s.ml.Members() {
		if n.Name == LauncherNode {
			return n, nil
		}
	}
	return nil, fmt.Errorf("boot: rank %d: gorun's membership node is gone", s.env.Rank)
}

func (s *Session) sendFT(m FTMsg) error {
	if !s.env.Recovery {
		return ErrNoRecovery
	}
	n, err := s.launcher()
	if err != nil {
		return err
	}
	b, err := EncodeFT(m)
	if err != nil {
		return err
	}
	if err := s.ml.SendReliable(n, b); err != nil {
		return fmt.Errorf("boot: rank %d: send to gorun: %w", s.env.Rank, err)
	}
	return nil
}

// Revoke asks the launcher to tell every other member (world ranks) that
// the communicator with context ctx is revoked.
func (s *Session) Revoke(ctx uint32, members []int) error {
	return s.sendFT(FTMsg{Kind: FTRevoke, Rank: s.env.Rank, Ctx: ctx, Members: members})
}

// Agree contributes words to the agreement key among members (world
// ranks, the same list at every member) for operation op (the same at
// every member: gorun ends the job when they differ) and returns the bitwise and of
// the contributions of the members that did not fail, and the members
// that failed (sorted), the same at every member. key must name one
// agreement of one communicator: the same at its members, never reused.
func (s *Session) Agree(key, op string, members []int, words []uint64) ([]uint64, []int, error) {
	if !s.env.Recovery {
		return nil, nil, ErrNoRecovery
	}
	ch := make(chan FTMsg, 1)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, nil, errors.New("boot: session closed")
	}
	if s.ft.agrees == nil {
		s.ft.agrees = map[string]chan FTMsg{}
	}
	if _, dup := s.ft.agrees[key]; dup {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("boot: agreement %s already in progress", key)
	}
	s.ft.agrees[key] = ch
	s.mu.Unlock()
	if err := s.sendFT(FTMsg{Kind: FTAgree, Key: key, Rank: s.env.Rank, Members: members, Words: words, Text: op}); err != nil {
		s.mu.Lock()
		delete(s.ft.agrees, key)
		s.mu.Unlock()
		return nil, nil, err
	}
	m := <-ch
	if m.Text == closedText {
		return nil, nil, fmt.Errorf("boot: agreement %s: the session closed while waiting", key)
	}
	if len(m.Words) != len(words) {
		return nil, nil, fmt.Errorf("boot: agreement %s: %d words back for %d", key, len(m.Words), len(words))
	}
	return m.Words, m.Failed, nil
}

// AgreeKey names the seq-th agreement of the communicator with context
// ctx whose members are members.
func AgreeKey(ctx uint32, seq uint64, members []int) string {
	b := make([]byte, 0, 32+4*len(members))
	b = strconv.AppendUint(b, uint64(ctx), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, seq, 10)
	for _, r := range members {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(r), 10)
	}
	return string(b)
}
