package mpi_test

import (
	"errors"
	"fmt"

	"github.com/gorun/gorun/mpi"
)

func ExampleCreateKeyval() {
	w := mpi.World()
	// A library caches its state on a communicator: a duplicate gets a
	// copy, and the state is released when the communicator is freed.
	key, _ := mpi.CreateKeyval(
		func(old *mpi.Comm, k mpi.Keyval, v any) (any, bool, error) { return v.(int) * 10, true, nil },
		func(c *mpi.Comm, k mpi.Keyval, v any) error { fmt.Println("released", v); return nil })
	c, _ := w.Dup()
	c.SetAttr(key, 4)
	d, _ := c.Dup()
	v, ok, _ := d.GetAttr(key)
	fmt.Println(v, ok)
	d.Free()
	c.Free()
	mpi.FreeKeyval(key)
	// Output:
	// 40 true
	// released 40
	// released 4
}

func ExampleNewErrhandler() {
	w := mpi.World()
	c, _ := w.Dup()
	c.SetErrhandler(mpi.NewErrhandler(func(c *mpi.Comm, err error) {
		fmt.Println("handler:", errors.Is(err, mpi.ErrRank))
	}))
	err := mpi.Send(c, []int{1}, 7, 0) // no rank 7: the handler runs, then the error is returned
	fmt.Println(errors.Is(err, mpi.ErrRank))
	c.Free()
	// Output:
	// handler: true
	// true
}
