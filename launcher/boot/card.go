package boot

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Card is a rank's business card: who it is, where it runs (its host and
// its Placement there) and the addresses its transports listen on. It
// travels as memberlist node metadata, so it must stay under 512 bytes
// encoded (memberlist.MetaMaxSize; Join refuses a larger one): field names
// on the wire are one or two letters, and card_test.go checks that a card
// with 8 GPUs, 2 NICs, a 64-byte host id and every transport's address
// fits.
type Card struct {
	Rank      int               `msgpack:"r"`
	PID       int               `msgpack:"p"`
	HostID    string            `msgpack:"h"`
	Addrs     map[string][]byte `msgpack:"a"`
	Placement `msgpack:",inline"`
}

// Roster is every rank's card, indexed by rank, pushed by the launcher.
type Roster struct {
	JobID string `msgpack:"j"`
	Cards []Card `msgpack:"c"`
}

// Encode encodes the card for node metadata.
func (c Card) Encode() ([]byte, error) { return msgpack.Marshal(&c) }

// DecodeCard decodes node metadata. Malformed bytes are an error
// (checkShape), never a panic or an allocation beyond a small multiple of
// len(b).
func DecodeCard(b []byte) (Card, error) {
	var c Card
	if err := checkShape(b); err != nil {
		return c, fmt.Errorf("business card: %w", err)
	}
	err := msgpack.Unmarshal(b, &c)
	return c, err
}

// rosterTag prefixes roster messages on memberlist's user channel.
const rosterTag = 'R'

// EncodeRoster encodes the roster as a memberlist user message.
func EncodeRoster(r Roster) ([]byte, error) {
	b, err := msgpack.Marshal(&r)
	if err != nil {
		return nil, err
	}
	return append([]byte{rosterTag}, b...), nil
}

func decodeRoster(b []byte) (Roster, error) {
	var r Roster
	if len(b) == 0 || b[0] != rosterTag {
		return r, fmt.Errorf("not a roster message")
	}
	if err := checkShape(b[1:]); err != nil {
		return r, fmt.Errorf("roster: %w", err)
	}
	err := msgpack.Unmarshal(b[1:], &r)
	return r, err
}

// GossipKey derives the memberlist encryption key (AES-256) from the job
// secret, so the raw secret never becomes a wire key.
func GossipKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("gorun memberlist"))
	return m.Sum(nil)
}

// RankNode is the memberlist node name of a rank; the launcher's node is
// LauncherNode.
func RankNode(rank int) string { return fmt.Sprintf("rank-%d", rank) }

// RankOfNode is the rank whose node name (RankNode) is name, if it names
// a rank of a job of size ranks: node names come from peers, so a name
// out of range, with a sign, leading zeros or trailing bytes is not a
// rank (fmt.Sscanf's "rank-%d" took "rank-99", "rank--1" and "rank-3x").
func RankOfNode(name string, size int) (int, bool) {
	s, ok := strings.CutPrefix(name, "rank-")
	if !ok || s == "" || len(s) > 1 && s[0] == '0' || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	r, err := strconv.Atoi(s)
	if err != nil || r >= size {
		return 0, false
	}
	return r, true
}

// LauncherNode is the launcher's memberlist node name.
const LauncherNode = "gorun"
