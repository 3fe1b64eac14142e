package mpi

import (
	"errors"

	"github.com/gorun/gorun/p2p"
)

// Request is a nonblocking operation in flight. Complete it with Wait,
// Test, Waitall, Waitany or Testall; until then its buffer must stay
// untouched.
//
// A point-to-point Request (Isend, Irecv, Imrecv, a persistent run) holds
// the engine's request only while the operation runs: the completion call
// that reports it (Wait, Test, Waitall...) keeps the status and error in
// the Request and gives the engine's part back for reuse, so that the
// public Request stays small and stays valid: repeated Waits, Test and
// Cancelled after completion report the same outcome, and nothing the
// caller holds is ever reused. Two exceptions: Isend returns one shared,
// completed request for every send that completed within the call
// (Comm.sentReq), which only reads can reach; and WaitallFree, asked to,
// sets its entries to nil and reuses their requests.
type Request struct {
	// r: nil for ProcNull, and once completion is reported. It is set to
	// nil under the engine's lock when given back (the engine may hand it
	// to another operation at once), and a Cancel from another goroutine
	// reads it under that lock (Engine.CancelRecvAt).
	r    *p2p.Request
	c    *Comm
	op   string
	elem int
	// done holds the outcome once reported, so repeated Waits agree.
	st  Status
	err error
	// post runs once at completion (the object API decodes there).
	post func(Status, error) error
	// pers describes a persistent request (persistent.go); nil for one
	// started once.
	pers *persistent
	// nb: the nonblocking call (a collective's, launch) whose notice r
	// receives; its outcome is the request's.
	nb *nbCall
	// own: r is from the engine's free list and goes back to it at
	// completion.
	own bool
	// reusable: made by newRequest (Isend, Irecv and their device and
	// layout forms), which WaitallFree may give back for reuse; not the
	// shared completed send request nor other kinds.
	reusable bool
	// recv: a point-to-point receive, the one kind Cancel withdraws.
	recv bool
	fin  bool // the outcome is in st and err
}

// started records the p2p request of a started operation; nil means the
// peer was ProcNull and the request is complete already.
func (q *Request) started(r *p2p.Request) *Request {
	if r == nil {
		q.fin, q.st = true, Status{Source: ProcNull, Tag: AnyTag}
		return q
	}
	q.r = r
	return q
}

// startedOwn is started for a request of the engine's free list, which
// finish gives back.
func (q *Request) startedOwn(r *p2p.Request) *Request {
	q.own = r != nil
	return q.started(r)
}

func (q *Request) finish() (Status, error) {
	st, err := q.report()
	if q.own {
		q.own = false
		q.c.rt.eng.ReleaseAt(&q.r)
	}
	return st, err
}

// report records the outcome of the completed request q once (later calls
// return it again) and returns it; finish also gives the engine's request
// back.
func (q *Request) report() (Status, error) {
	if q.fin {
		if q.pers != nil {
			q.pers.active = false
		}
		return q.st, q.err
	}
	return q.record(q.r.Result())
}

// record is report of the engine's outcome ps and err.
func (q *Request) record(ps p2p.Status, err error) (Status, error) {
	if q.pers != nil {
		q.pers.active = false
	}
	q.st = q.c.statusOf(ps, q.elem)
	if errors.Is(err, p2p.ErrCancelled) {
		// MPI's cancelled receive: complete, no error, flagged status.
		q.st = Status{Source: AnySource, Tag: AnyTag, unit: unitOf(q.elem, true)}
		err = nil
	}
	q.err = wrap(q.op, err)
	if q.post != nil {
		q.err = q.post(q.st, q.err)
	}
	if q.nb != nil {
		if e := q.nb.res.get(); e != nil {
			q.err = e
		}
	}
	q.fin = true
	return q.st, q.err
}

// Wait blocks until the request completes and returns its status (for a
// receive) and error. A nil request, or a persistent one not started,
// returns at once with MPI's empty status: Source AnySource, Tag AnyTag,
// no bytes.
func (q *Request) Wait() (Status, error) {
	if q == nil || q.inactive() {
		return emptyStatus, nil
	}
	if !q.fin {
		if nc := q.nb; nc != nil && !q.r.Done() && !q.runNotBegun() {
			// A helper runs it, polling for both meanwhile, without
			// giving way on every poll (p2p's giveWay).
			q.c.rt.eng.Parked()
			nc.ended.Wait()
			q.c.rt.eng.Woke()
		}
		if q.own {
			// Waited for, recorded and given back with one lock, the
			// poll's, where finish took three (the poll's, the release's
			// and a receive's cancel lock).
			q.own = false
			st, err := q.record(q.r.WaitReleaseAt(&q.r))
			return st, q.fail(err)
		}
		q.r.Wait()
	}
	st, err := q.finish()
	return st, q.fail(err)
}

// runNotBegun runs q's nonblocking call (q.nb) on the caller's goroutine
// if no helper has begun it, with no hand-off (launch), and reports
// whether it did.
func (q *Request) runNotBegun() bool {
	nc := q.nb
	if q.c.rt.nbq.claim(q.c.rt.eng, nc) || nc.take() {
		nc.exec()
		return true
	}
	return false
}

// WaitFree is Wait that then gives q back for reuse by later Isend and
// Irecv calls, as WaitallFree does with its requests (MPI_Wait frees its
// request): use it where nothing else holds q, which must not be used
// after it (another operation may have it already), and where no Cancel
// or WaitContext runs on q meanwhile. A persistent request stays,
// inactive. What it saves is the new Request every later Irecv would
// take (fresh memory: see Waitall): an exchange of 8 bytes between two
// ranks on the 2-core VM (Irecv, Isend, then each request's WaitFree or
// Wait; bench/exchange -m waitfree|wait) took 151-177 ns against Wait's
// 170-174 (Open MPI's MPI_Wait 137-158), a noisy difference since Wait
// gives the engine's request back under the poll's lock.
func (q *Request) WaitFree() (Status, error) {
	if q == nil || q.inactive() {
		return emptyStatus, nil
	}
	c := q.c // give clears q
	if !q.fin {
		if q.nb != nil {
			q.runNotBegun()
		}
		q.r.Wait()
	}
	st, err := q.report()
	c.rt.eng.Release(q.give()) // nil (nothing to give back) is let be
	return st, c.fail(err)
}

// fail applies the handler of q's communicator to err (a failed
// completion), as every call on a communicator does (errhandler.go).
func (q *Request) fail(err error) error {
	if q == nil {
		return err
	}
	return q.c.fail(err)
}

// failTo is fail for a deferred call on a named error result.
func (q *Request) failTo(err *error) { *err = q.fail(*err) }

// Test reports whether the request has completed, progressing the
// transports once.
func (q *Request) Test() (bool, Status, error) {
	if q == nil || q.inactive() {
		return true, emptyStatus, nil
	}
	if q.fin {
		st, err := q.finish2()
		return true, st, q.fail(err)
	}
	ok, _, _ := q.r.Test()
	if !ok {
		return false, Status{}, nil
	}
	st, err := q.finish()
	return true, st, q.fail(err)
}

// finish2 is finish for a request that may be nil.
func (q *Request) finish2() (Status, error) {
	if q == nil {
		return emptyStatus, nil
	}
	return q.finish()
}

func engineOf(reqs []*Request) *p2p.Engine {
	for _, q := range reqs {
		if q != nil && q.r != nil && !q.inactive() {
			return q.c.rt.eng
		}
	}
	return nil
}

// engineOfAny is the engine of the first request of reqs that holds one
// of the engine's requests, active or not.
func engineOfAny(reqs []*Request) *p2p.Engine {
	for _, q := range reqs {
		if q != nil && q.r != nil {
			return q.c.rt.eng
		}
	}
	return nil
}

// waitAny blocks until some active request of reqs that holds an engine
// request has completed and returns its index; engineOf(reqs) is e, so
// there is one.
func waitAny(e *p2p.Engine, reqs []*Request) int {
	idx := -1
	e.WaitFor(func() bool {
		for i, q := range reqs {
			if q != nil && q.r != nil && !q.inactive() && q.r.Done() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// Waitall blocks until every request has completed and returns their
// statuses. When some failed, the error is a *RequestErrors that holds
// each request's error (MPI_ERR_IN_STATUS): errors.Is(err, ErrTruncate)
// holds if any request was truncated, and errors.Is(err, ErrInStatus)
// always. Nil requests count as complete. The requests stay valid (a
// later Wait returns the same status), so none can be reused: in a loop
// of small exchanges WaitallFree, or WaitallInto and WaitFree, are the
// forms that allocate nothing (bench/exchange on the 2-core VM: Irecv,
// Isend and Waitall 235-254 ns an exchange, with WaitallFree 139-141,
// Open MPI's MPI_Waitall 128-149).
func Waitall(reqs []*Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	return sts, waitall("Waitall", reqs, sts, false)
}

// WaitallInto is Waitall with statuses the caller owns, as MPI_Waitall's
// array: it stores request i's status in sts[i], or stores none when sts
// is nil (MPI_STATUSES_IGNORE). A loop that posts windows of nonblocking
// operations at the message rate reuses one slice instead of Waitall's
// new one per call: a fresh slice is 40 bytes of new memory a request,
// and on a 2-core VM the 8-byte osu_mbw_mr sender spent a fifth of its
// time storing statuses into it (docs/measurements.md, "Message rate").
// A non-nil sts shorter than reqs is an error (ErrArg) and nothing waits.
func WaitallInto(reqs []*Request, sts []Status) error {
	return waitall("WaitallInto", reqs, sts, false)
}

// WaitallFree is WaitallInto(reqs, nil) that then sets the entries of
// reqs to nil, as MPI_Waitall sets its handles to MPI_REQUEST_NULL, and
// gives the point-to-point requests among them back for reuse by later
// Isend and Irecv calls (and their Issend, device and layout forms; other
// requests, such as Imrecv's, Ibsend's and collectives', are only
// dropped). Use it where nothing else holds these requests: another copy
// of one of the pointers would later see a request reused by another
// operation, and no Cancel or WaitContext may run on them meanwhile.
// Persistent requests stay (inactive). When some request failed, the
// error is Waitall's *RequestErrors (Errs indexed as reqs) and the
// entries are set to nil all the same, as MPI_Waitall frees them.
// A loop of windows at the message rate then allocates nothing: each
// Irecv's request was 152 bytes of new memory then, whose page faults set the
// rate of short runs (docs/measurements.md, "Message rate").
func WaitallFree(reqs []*Request) error {
	return waitall("WaitallFree", reqs, nil, true)
}

// waitall is Waitall and WaitallInto, named op in their errors, and with
// free WaitallFree.
func waitall(op string, reqs []*Request, sts []Status, free bool) error {
	if sts != nil && len(sts) < len(reqs) {
		err := errorf(ErrArg, op, "%d statuses for %d requests", len(sts), len(reqs))
		for _, q := range reqs {
			if q != nil {
				return q.fail(err)
			}
		}
		return err
	}
	e := engineOf(reqs)
	if e != nil && e.Pending() {
		// Nonblocking calls not begun run here, in turn, as in Wait
		// (the others begin on helpers at this goroutine's first wait);
		// a window of point-to-point requests is not walked for them.
		for _, q := range reqs {
			if q != nil && q.nb != nil && !q.fin && !q.inactive() {
				q.runNotBegun()
			}
		}
	}
	if e != nil {
		i := 0
		e.WaitFor(func() bool {
			for ; i < len(reqs); i++ {
				if q := reqs[i]; q != nil && !q.inactive() && !q.done() {
					return false
				}
			}
			return true
		})
	}
	var errs []error
	own := false
	for i, q := range reqs {
		if q == nil || q.inactive() {
			if sts != nil {
				sts[i] = emptyStatus // nothing of a window before stays
			}
			continue
		}
		own = own || q.own
		if q.fin && q.err == nil && q.pers == nil && sts == nil {
			// Reported already with nothing to say (report would only
			// return that): the communicator's completed send (sentReq)
			// fills a sender's whole window at the small-message rate.
			// Counted in own first, so that whatever it holds still
			// goes back below.
			continue
		}
		if free && q.own && !q.fin && q.post == nil && q.nb == nil && q.pers == nil {
			// Given back below: nobody reads its status, only an error
			// matters (the status is 5% of a receiver's time at the
			// 8-byte message rate).
			if _, err := q.r.Result(); err == nil {
				continue
			}
		}
		st, err := q.report()
		if sts != nil {
			sts[i] = st
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, len(reqs))
			}
			errs[i] = err
		}
	}
	// The error handler is that of the first failing request's
	// communicator, read now: WaitallFree gives the requests back below,
	// and another goroutine may take one at once.
	var fc *Comm
	if errs != nil {
		fc = failing(reqs, errs)
	}
	if own {
		// Every engine request back under one lock, not one per message,
		// each entry's r set to nil under it (Cancel reads r under that
		// lock; WaitallFree's requests see no Cancel: its contract).
		e := engineOfAny(reqs)
		e.ReleaseN(len(reqs), func(i int) *p2p.Request {
			q := reqs[i]
			if free && q != nil {
				// The entry goes here, under the lock: once it is released
				// another goroutine may take q from the free list.
				if q.pers == nil {
					reqs[i] = nil
				}
				return q.give()
			}
			if q == nil || !q.own || !q.fin {
				return nil // the shared completed send request too: never written
			}
			r := q.r
			q.r, q.own = nil, false
			return r
		})
	}
	if free && !own {
		// Nothing went back to the engine: no other goroutine can hold these.
		for i, q := range reqs {
			if q != nil && q.pers == nil {
				reqs[i] = nil
			}
		}
	}
	if errs != nil {
		return fc.fail(&RequestErrors{Op: op, Errs: errs})
	}
	return nil
}

// give, for WaitallFree (in ReleaseN, under the engine lock), takes from
// the completed q the engine's request it holds, if any, and returns it
// for release; a point-to-point request goes with it, cleared, to the
// engine's free list (Keep), for the Isend or Irecv that takes it next
// (ownRequest). Others, the shared completed send request among them,
// are only dropped; a persistent one keeps its place, inactive.
func (q *Request) give() *p2p.Request {
	if !q.own {
		return nil
	}
	r := q.r
	if q.reusable && q.pers == nil {
		*q = Request{}
		r.Keep(q)
	} else {
		q.r, q.own = nil, false
	}
	return r
}

// failing is the communicator whose error handler takes the errors of
// several requests: that of the first request whose entry of errs is set
// (MPI names no one communicator for them).
func failing(reqs []*Request, errs []error) *Comm {
	for i, e := range errs {
		if e != nil && reqs[i] != nil {
			return reqs[i].c
		}
	}
	return nil
}

// Waitany blocks until one request has completed, sets its entry to nil
// (like MPI_REQUEST_NULL; a persistent request stays, inactive) and
// returns its index and outcome. With no active request it returns index
// -1 at once.
func Waitany(reqs []*Request) (int, Status, error) {
	for i, q := range reqs {
		if q != nil && q.r == nil && !q.inactive() { // ProcNull: complete from the start
			return reqs[i].take(reqs, i)
		}
	}
	e := engineOf(reqs)
	if e == nil {
		return -1, emptyStatus, nil
	}
	i := waitAny(e, reqs)
	return reqs[i].take(reqs, i)
}

// take reports the completed request q, reqs[i], and clears its entry
// unless it is persistent.
func (q *Request) take(reqs []*Request, i int) (int, Status, error) {
	st, err := q.finish()
	if q.pers == nil {
		reqs[i] = nil
	}
	return i, st, q.fail(err)
}

// Testall reports whether every request has completed (progressing once);
// if so it returns their statuses as Waitall does.
func Testall(reqs []*Request) (bool, []Status, error) {
	if e := engineOf(reqs); e != nil {
		e.Progress()
		e.GiveWay() // as Test does
	}
	for _, q := range reqs {
		if q != nil && q.r != nil && !q.inactive() && !q.r.Done() {
			return false, nil, nil
		}
	}
	sts, err := Waitall(reqs)
	return true, sts, err
}
