package launcher

import (
	"testing"
	"time"

	"github.com/gorun/gorun/launcher/boot"
	"github.com/hashicorp/memberlist"
)

// TestSeedCallbacksNeverBlock: memberlist's callbacks must not block, so
// the seed's NotifyJoin and NotifyLeave return at once even when nobody
// reads the launcher's events (a busy loop with a full channel, or one
// that has ended), and the events arrive in order once it reads again.
func TestSeedCallbacksNeverBlock(t *testing.T) {
	events := make(chan event) // unbuffered, and nobody reads yet
	s, err := startSeed("127.0.0.1", make([]byte, 32), "seedtest", 4, events)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	card, err := boot.Card{Rank: 2, HostID: "h"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	node := &memberlist.Node{Name: "rank-2", Meta: card}
	done := make(chan struct{})
	go func() {
		for range 100 {
			s.NotifyJoin(node)
			s.NotifyLeave(node)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("memberlist callbacks blocked on the launcher's event channel")
	}
	for i := range 200 {
		select {
		case ev := <-events:
			want := evJoined
			if i%2 == 1 {
				want = evDead
			}
			if ev.kind != want || ev.rank != 2 {
				t.Fatalf("event %d: kind %v rank %d, want kind %v rank 2", i, ev.kind, ev.rank, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
}
