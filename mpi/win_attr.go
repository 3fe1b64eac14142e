package mpi

import "fmt"

// Window attributes (MPI-3 §11.2.6 and §6.7.3). MPI_WIN_BASE, _SIZE and
// _DISP_UNIT are Local, Size and the element size of T (displacements
// count elements); MPI_WIN_CREATE_FLAVOR and MPI_WIN_MODEL are Flavor and
// Model; user attributes (MPI_Win_set_attr and the rest) are those of the
// window's communicator (Comm): keys from CreateKeyval, delete callbacks
// run at Free and called with Comm.

// Flavor is how a window was made (MPI_WIN_CREATE_FLAVOR, Open MPI's
// values).
type Flavor int

const (
	FlavorCreate   Flavor = 1 // WinCreate
	FlavorAllocate Flavor = 2 // WinAllocate
	FlavorDynamic  Flavor = 3 // WinCreateDynamic
	FlavorShared   Flavor = 4 // WinAllocateShared
)

func (f Flavor) String() string {
	switch f {
	case FlavorCreate:
		return "create"
	case FlavorAllocate:
		return "allocate"
	case FlavorDynamic:
		return "dynamic"
	case FlavorShared:
		return "shared"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

// Flavor returns how w was made (MPI_WIN_CREATE_FLAVOR).
func (w *Win[T]) Flavor() Flavor { return w.flavor }

// Model is a window's memory model (MPI_WIN_MODEL).
type Model int

const (
	// ModelUnified: the public and private copies of a window are the
	// same memory (MPI_WIN_UNIFIED), as on every gorun window; Sync still
	// orders this rank's loads and stores with the others' operations.
	ModelUnified Model = 0
	// ModelSeparate: MPI_WIN_SEPARATE, for completeness; no gorun window
	// has it.
	ModelSeparate Model = 1
)

// Model returns w's memory model (MPI_WIN_MODEL): always ModelUnified.
func (w *Win[T]) Model() Model { return ModelUnified }

// SetAttr sets a user attribute on w (MPI_Win_set_attr), as
// Comm.SetAttr does on w's communicator.
func (w *Win[T]) SetAttr(key Keyval, v any) (err error) {
	defer w.failTo(&err)
	if err := w.live("Win.SetAttr"); err != nil {
		return err
	}
	return reop("Win.SetAttr", w.wc.SetAttr(key, v))
}

// GetAttr returns a user attribute of w (MPI_Win_get_attr) and whether
// it is set.
func (w *Win[T]) GetAttr(key Keyval) (_ any, _ bool, err error) {
	defer w.failTo(&err)
	if err := w.live("Win.GetAttr"); err != nil {
		return nil, false, err
	}
	if predefined(key) {
		return nil, false, errorf(ErrKeyval, "Win.GetAttr", "key %d is a communicator's predefined attribute: a window's are Local, Size, Flavor and Model", int(key))
	}
	v, ok, err := w.wc.GetAttr(key)
	return v, ok, reop("Win.GetAttr", err)
}

// DeleteAttr deletes a user attribute of w (MPI_Win_delete_attr), running
// its delete callback.
func (w *Win[T]) DeleteAttr(key Keyval) (err error) {
	defer w.failTo(&err)
	if err := w.live("Win.DeleteAttr"); err != nil {
		return err
	}
	return reop("Win.DeleteAttr", w.wc.DeleteAttr(key))
}
