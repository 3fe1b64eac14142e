package p2p

import "fmt"

// Revoking a range of tags of one context: how package coll fails one
// collective call everywhere (each call has its own tags on the
// communicator's collective context) without touching the communicator's
// other calls.
//
// The ranges revoked on a context are kept in a short list, newest last,
// at most maxRevokedRanges of them; revoking one more forgets the oldest.
// Calls are short-lived: a range matters only while messages of its call
// may still arrive, and a forgotten range only means that a late message
// of that call stays unexpected, as it would without any revoke. The
// owner of the tags may forget a range itself (UnrevokeTags) before it
// reuses those tags, and Unrevoke forgets them all with the context.
//
// Receives and probes with AnyTag are never failed by a range, and are not
// refused later: a wildcard is not "of" any range (coll never posts one on
// its collective context; on another context the caller knows what its
// AnyTag may match). An AnyTag receive may therefore still match a message
// in a revoked range that arrives after the revoke.

// maxRevokedRanges bounds the ranges remembered per context. Package coll
// revokes one range per failed call; 64 is more calls failed in a row on
// one communicator than a program that handles its errors lives through
// before freeing it.
const maxRevokedRanges = 64

// tagRange is a revoked range of tags, lo..hi inclusive, and the error of
// operations in it.
type tagRange struct {
	lo, hi int
	err    error
}

// RevokeTags is Revoke for the tags lo..hi (inclusive) of ctx only:
// posted receives of ctx with a tag in the range that no message has
// matched yet fail with err; unexpected messages of ctx in the range are
// dropped, and a rendezvous offer (RTS) among them is refused, so that its
// sender fails with ErrRevoked; later sends, receives and probes on ctx
// with a tag in the range fail at once with err, and later messages in it
// are dropped (an RTS refused). Operations already matched run to their
// end, as with Revoke. AnyTag receives are left alone (see above).
// Revoking a range again, or a range of a revoked context, does nothing.
// A range with lo < 0 or hi < lo is the caller's bug: RevokeTags panics.
func (e *Engine) RevokeTags(ctx uint32, lo, hi int, err error) {
	if lo < 0 || hi < lo {
		panic(fmt.Sprintf("p2p: RevokeTags(%d, %d, %d): not a range of tags", ctx, lo, hi))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.revokedErr(ctx) != nil {
		return
	}
	if e.revTags == nil {
		e.revTags = map[uint32][]tagRange{}
	}
	rs := e.revTags[ctx]
	for _, r := range rs {
		if r.lo == lo && r.hi == hi {
			return
		}
	}
	if len(rs) >= maxRevokedRanges {
		rs = append(rs[:0], rs[len(rs)-maxRevokedRanges+1:]...)
	}
	e.revTags[ctx] = append(rs, tagRange{lo: lo, hi: hi, err: err})
	q := e.mq[ctx]
	if q == nil {
		return
	}
	e.dropTags(ctx, q, func(tag int) bool { return tag != AnyTag && lo <= tag && tag <= hi }, err)
}

// UnrevokeTags forgets the revoked range lo..hi of ctx (exactly as given
// to RevokeTags): its owner is about to use those tags again.
func (e *Engine) UnrevokeTags(ctx uint32, lo, hi int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.revTags[ctx]
	for i, r := range rs {
		if r.lo == lo && r.hi == hi {
			rs = append(rs[:i], rs[i+1:]...)
			break
		}
	}
	if len(rs) == 0 {
		delete(e.revTags, ctx)
		return
	}
	e.revTags[ctx] = rs
}

// tagErr is the error of operations on ctx with tag: ctx revoked, or tag
// in one of its revoked ranges (never for AnyTag); the lock is held.
func (e *Engine) tagErr(ctx uint32, tag int) error {
	if err := e.revokedErr(ctx); err != nil {
		return err
	}
	if len(e.revTags) == 0 || tag == AnyTag {
		return nil
	}
	for _, r := range e.revTags[ctx] {
		if r.lo <= tag && tag <= r.hi {
			return r.err
		}
	}
	return nil
}
