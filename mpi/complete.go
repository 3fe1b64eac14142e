package mpi

import (
	"fmt"
	"strings"
)

// ErrInStatus is the class of an error that carries one error per request
// (MPI_ERR_IN_STATUS): Waitall's, Testall's, Waitsome's and Testsome's,
// a *RequestErrors.
const ErrInStatus Class = 18

func init() { classNames[ErrInStatus] = "error in status" }

// RequestErrors is the error of a call that completes several requests
// when some of them failed (MPI_ERR_IN_STATUS): Errs[i] is the error of
// the i-th request reported (for Waitall and Testall, reqs[i]; for
// Waitsome and Testsome, the request of indices[i]), nil where it
// succeeded. errors.Is and errors.As look into every one of them
// (errors.Is(err, ErrTruncate) holds when any was truncated), and
// errors.Is(err, ErrInStatus) holds too.
type RequestErrors struct {
	Op   string
	Errs []error
}

func (e *RequestErrors) Error() string {
	var b strings.Builder
	n := 0
	for i, err := range e.Errs {
		if err == nil {
			continue
		}
		if n < 3 {
			fmt.Fprintf(&b, "; request %d: %v", i, err)
		}
		n++
	}
	if n > 3 {
		fmt.Fprintf(&b, "; and %d more", n-3)
	}
	return fmt.Sprintf("mpi: %s: %d of %d requests failed%s", e.Op, n, len(e.Errs), b.String())
}

// Unwrap returns the requests' errors that are not nil.
func (e *RequestErrors) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Is reports whether target is ErrInStatus.
func (e *RequestErrors) Is(target error) bool { return target == ErrInStatus }

// inactive reports whether q is a persistent request not started since
// its last completion was reported.
func (q *Request) inactive() bool { return q.pers != nil && !q.pers.active }

// done reports, without progressing, whether q has completed.
func (q *Request) done() bool { return q.r == nil || q.r.Done() }

// Testany progresses once and, if some active request has completed,
// reports it as Waitany does (its entry set to nil, unless persistent)
// and returns its index with ok true. With no active request it returns
// index -1 and ok true (MPI_Testany's flag); with none completed, ok
// false.
func Testany(reqs []*Request) (index int, ok bool, st Status, err error) {
	if e := engineOf(reqs); e != nil {
		e.Progress()
		e.GiveWay() // as Test does
	}
	active := false
	for i, q := range reqs {
		if q == nil || q.inactive() {
			continue
		}
		active = true
		if q.fin || q.done() {
			i, st, err := q.take(reqs, i)
			return i, true, st, err
		}
	}
	return -1, !active, emptyStatus, nil
}

// Waitsome blocks until at least one active request has completed and
// reports every one that has: their indices, statuses and, when some
// failed, a *RequestErrors whose Errs follow the indices. Their entries
// are set to nil (persistent ones stay, inactive). With no active request
// it returns no index at once (MPI_UNDEFINED's outcount).
func Waitsome(reqs []*Request) ([]int, []Status, error) {
	if ix, sts, err := some("Waitsome", reqs); ix != nil || err != nil {
		return ix, sts, err
	}
	e := engineOf(reqs)
	if e == nil {
		return nil, nil, nil
	}
	waitAny(e, reqs)
	return some("Waitsome", reqs)
}

// Testsome is Waitsome that does not block: it progresses once and
// returns the requests completed by then (possibly none).
func Testsome(reqs []*Request) ([]int, []Status, error) {
	if e := engineOf(reqs); e != nil {
		e.Progress()
		e.GiveWay() // as Test does
	}
	return some("Testsome", reqs)
}

// some reports every active request of reqs that has completed.
func some(op string, reqs []*Request) ([]int, []Status, error) {
	var ix []int
	var sts []Status
	var errs []error
	var first *Request // the first that failed, whose handler is applied
	for i, q := range reqs {
		if q == nil || q.inactive() || !(q.fin || q.done()) {
			continue
		}
		st, err := q.finish()
		if q.pers == nil {
			reqs[i] = nil
		}
		ix, sts, errs = append(ix, i), append(sts, st), append(errs, err)
		if err != nil && first == nil {
			first = q
		}
	}
	if first != nil {
		return ix, sts, first.fail(&RequestErrors{Op: op, Errs: errs})
	}
	return ix, sts, nil
}
