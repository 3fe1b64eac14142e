package mpi

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Attribute caching (MPI_Comm_create_keyval, MPI_Comm_set_attr, ...): a
// program hangs values on a communicator under keys of its own, and
// callbacks decide what happens to them when the communicator is
// duplicated (Dup, Idup) or freed (Free).
//
// Callbacks run in the goroutine of the call that runs them (for Idup, in
// the goroutine that completes the duplicate, before its request
// completes), with no lock of this package held: they may call GetAttr,
// SetAttr or any other call of this package. Dup and Idup copy in the
// order the attributes were set; Free deletes in the reverse order.

// Keyval is an attribute key (MPI_Comm_create_keyval's keyval).
type Keyval int

// The predefined keys. Their values are the same on every communicator,
// ints, and cannot be set, deleted or freed.
const (
	// KeyTagUB is MPI_TAG_UB: the largest tag this package accepts,
	// TagUB.
	KeyTagUB Keyval = -1
	// KeyUniverseSize is MPI_UNIVERSE_SIZE: how many processes the job's
	// hosts have slots for (gorun's -H host:N, --hostfile slots=N, or the
	// cores of the local host), at least the world's size; 1 in a
	// singleton.
	KeyUniverseSize Keyval = -2
	// KeyAppNum is MPI_APPNUM: the index of this process's program in an
	// MPMD job (gorun -np 2 ./a : -np 1 ./b: 0 at ./a's ranks, 1 at
	// ./b's), 0 in a job of one program. A singleton, which no launcher
	// started, has no value (GetAttr reports false), as MPI allows.
	KeyAppNum Keyval = -3
)

// predefined reports whether key is one of the predefined keys.
func predefined(key Keyval) bool { return key < 0 }

// predefinedAttr is the value of a predefined key on c, and whether it has
// one.
func (c *Comm) predefinedAttr(key Keyval) (any, bool, error) {
	switch key {
	case KeyTagUB:
		return TagUB, true, nil
	case KeyUniverseSize:
		return c.rt.env.UniverseSize, true, nil
	case KeyAppNum:
		if c.rt.env.AppNum < 0 {
			return nil, false, nil
		}
		return c.rt.env.AppNum, true, nil
	}
	return nil, false, errorf(ErrKeyval, "Comm.GetAttr", "unknown predefined key %d", key)
}

// CopyFunc decides what a duplicate of old gets for key, whose value in
// old is v: the value and true to set it on the duplicate, or false to
// leave the duplicate without it. An error fails the Dup (or the Idup's
// request).
type CopyFunc func(old *Comm, key Keyval, v any) (any, bool, error)

// DeleteFunc is called when key's value v leaves c: DeleteAttr, SetAttr
// over an existing value, Free. An error fails that call and leaves the
// value in place.
type DeleteFunc func(c *Comm, key Keyval, v any) error

type keyval struct {
	copy CopyFunc
	del  DeleteFunc
}

// attr is one cached value: its key's callbacks (kept after FreeKeyval, as
// MPI wants) and the order it was set in.
type attr struct {
	kv  *keyval
	v   any
	seq uint64
}

// attrs is a communicator's attribute cache.
type attrs struct {
	mu  sync.Mutex
	m   map[Keyval]attr
	seq uint64
}

var keyvals struct {
	mu   sync.Mutex
	next Keyval
	m    map[Keyval]*keyval
}

// CreateKeyval makes a new attribute key (MPI_Comm_create_keyval). A nil
// copy means a duplicate never gets the attribute (MPI_COMM_NULL_COPY_FN);
// a nil del means nothing happens when a value leaves
// (MPI_COMM_NULL_DELETE_FN).
func CreateKeyval(copy CopyFunc, del DeleteFunc) (Keyval, error) {
	keyvals.mu.Lock()
	defer keyvals.mu.Unlock()
	if keyvals.m == nil {
		keyvals.m = map[Keyval]*keyval{}
	}
	keyvals.next++
	k := keyvals.next
	keyvals.m[k] = &keyval{copy: copy, del: del}
	return k, nil
}

// FreeKeyval frees key (MPI_Comm_free_keyval): it can no longer be used
// with SetAttr, GetAttr or DeleteAttr, but values already set keep their
// callbacks, which still run at Dup and Free.
func FreeKeyval(key Keyval) error {
	if predefined(key) {
		return errorf(ErrKeyval, "FreeKeyval", "predefined key %d cannot be freed", key)
	}
	keyvals.mu.Lock()
	defer keyvals.mu.Unlock()
	if _, ok := keyvals.m[key]; !ok {
		return errorf(ErrKeyval, "FreeKeyval", "unknown or freed key %d", key)
	}
	delete(keyvals.m, key)
	return nil
}

func lookupKeyval(op string, key Keyval) (*keyval, error) {
	keyvals.mu.Lock()
	defer keyvals.mu.Unlock()
	kv, ok := keyvals.m[key]
	if !ok {
		return nil, errorf(ErrKeyval, op, "unknown or freed key %d", key)
	}
	return kv, nil
}

// SetAttr sets c's value for key (MPI_Comm_set_attr). A value already
// there is deleted first (its DeleteFunc runs); if that fails, the old
// value stays and SetAttr returns the error.
func (c *Comm) SetAttr(key Keyval, v any) error {
	return c.fail(c.setAttr(key, v))
}

func (c *Comm) setAttr(key Keyval, v any) error {
	const op = "Comm.SetAttr"
	if err := c.checkLive(op); err != nil {
		return err
	}
	if predefined(key) {
		return errorf(ErrKeyval, op, "predefined key %d cannot be set", key)
	}
	kv, err := lookupKeyval(op, key)
	if err != nil {
		return err
	}
	if err := c.deleteAttr(op, key); err != nil {
		return err
	}
	c.attrs.mu.Lock()
	defer c.attrs.mu.Unlock()
	if c.attrs.m == nil {
		c.attrs.m = map[Keyval]attr{}
	}
	c.attrs.seq++
	c.attrs.m[key] = attr{kv: kv, v: v, seq: c.attrs.seq}
	return nil
}

// GetAttr returns c's value for key and whether it has one
// (MPI_Comm_get_attr).
func (c *Comm) GetAttr(key Keyval) (any, bool, error) {
	const op = "Comm.GetAttr"
	if err := c.checkLive(op); err != nil {
		return nil, false, c.fail(err)
	}
	if predefined(key) {
		v, ok, err := c.predefinedAttr(key)
		return v, ok, c.fail(err)
	}
	if _, err := lookupKeyval(op, key); err != nil {
		return nil, false, c.fail(err)
	}
	c.attrs.mu.Lock()
	defer c.attrs.mu.Unlock()
	a, ok := c.attrs.m[key]
	return a.v, ok, nil
}

// DeleteAttr deletes c's value for key, running its DeleteFunc
// (MPI_Comm_delete_attr). Deleting a key without a value does nothing. If
// the DeleteFunc fails, the value stays and DeleteAttr returns the error.
func (c *Comm) DeleteAttr(key Keyval) error {
	const op = "Comm.DeleteAttr"
	if err := c.checkLive(op); err != nil {
		return c.fail(err)
	}
	if predefined(key) {
		return c.fail(errorf(ErrKeyval, op, "predefined key %d cannot be deleted", key))
	}
	if _, err := lookupKeyval(op, key); err != nil {
		return c.fail(err)
	}
	return c.fail(c.deleteAttr(op, key))
}

// deleteAttr takes key's value out of c and runs its DeleteFunc, putting
// the value back if that fails.
func (c *Comm) deleteAttr(op string, key Keyval) error {
	c.attrs.mu.Lock()
	a, ok := c.attrs.m[key]
	delete(c.attrs.m, key)
	c.attrs.mu.Unlock()
	if !ok || a.kv.del == nil {
		return nil
	}
	if err := a.kv.del(c, key, a.v); err != nil {
		c.attrs.mu.Lock()
		if _, again := c.attrs.m[key]; !again {
			c.attrs.m[key] = a
		}
		c.attrs.mu.Unlock()
		return &Error{Class: ErrOther, Op: op, Err: fmt.Errorf("delete callback of key %d: %w", key, err)}
	}
	return nil
}

// sortedAttrs returns c's keys in the order their values were set.
func (c *Comm) sortedAttrs() []Keyval {
	c.attrs.mu.Lock()
	defer c.attrs.mu.Unlock()
	keys := make([]Keyval, 0, len(c.attrs.m))
	for k := range c.attrs.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Keyval) int {
		sa, sb := c.attrs.m[a].seq, c.attrs.m[b].seq
		if sa < sb {
			return -1
		} else if sa > sb {
			return 1
		}
		return 0
	})
	return keys
}

// copyAttrs runs the CopyFunc of each of c's attributes, in the order they
// were set, and sets what they keep on d. If one fails, the values already
// copied to d are deleted again and the error returned.
func (c *Comm) copyAttrs(op string, d *Comm) error {
	for _, k := range c.sortedAttrs() {
		c.attrs.mu.Lock()
		a, ok := c.attrs.m[k]
		c.attrs.mu.Unlock()
		if !ok || a.kv.copy == nil {
			continue
		}
		v, keep, err := a.kv.copy(c, k, a.v)
		if err != nil {
			err = &Error{Class: ErrOther, Op: op, Err: fmt.Errorf("copy callback of key %d: %w", k, err)}
			return errors.Join(err, d.deleteAllAttrs(op))
		}
		if !keep {
			continue
		}
		d.attrs.mu.Lock()
		if d.attrs.m == nil {
			d.attrs.m = map[Keyval]attr{}
		}
		d.attrs.seq++
		d.attrs.m[k] = attr{kv: a.kv, v: v, seq: d.attrs.seq}
		d.attrs.mu.Unlock()
	}
	return nil
}

// deleteAllAttrs deletes c's attributes in the reverse order they were
// set, stopping at the first DeleteFunc that fails (that value and the
// ones set before it stay).
func (c *Comm) deleteAllAttrs(op string) error {
	keys := c.sortedAttrs()
	for i := len(keys) - 1; i >= 0; i-- {
		if err := c.deleteAttr(op, keys[i]); err != nil {
			return err
		}
	}
	return nil
}
