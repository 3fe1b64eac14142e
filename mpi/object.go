package mpi

import (
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// SendObj sends any msgpack-encodable value to rank dest of c.
func SendObj(c *Comm, v any, dest, tag int) error {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return errorf(ErrArg, "SendObj", "encode %T: %w", v, err)
	}
	return Send(c, b, dest, tag)
}

// RecvObj receives a value sent with SendObj into v, which must be a
// pointer, and returns the status (Status.Bytes is the encoded size). It
// takes the message with a matched probe (Mprobe), so that its size and
// its bytes are those of one message even when several goroutines
// receive from AnySource on c at once.
func RecvObj(c *Comm, v any, source, tag int) (_ Status, err error) {
	defer c.failTo(&err)
	// Checked before the message is taken: a value the decoder cannot
	// fill lost the message it was given.
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Status{}, errorf(ErrArg, "RecvObj", "v is %T: want a non-nil pointer to decode into", v)
	}
	m, st, err := Mprobe(c, source, tag)
	if err != nil {
		return st, reop("RecvObj", err)
	}
	b := make([]byte, st.Bytes())
	st, err = Mrecv(b, m)
	if err != nil {
		return st, reop("RecvObj", err)
	}
	if st.Source == ProcNull {
		return st, nil
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return st, errorf(ErrArg, "RecvObj", "decode %d bytes from rank %d into %T: %w", len(b), st.Source, v, err)
	}
	return st, nil
}

// BcastObj broadcasts root's value of *v to every rank's *v (v must be a
// pointer at every rank).
func BcastObj(c *Comm, v any, root int) error {
	if err := c.check("BcastObj"); err != nil {
		return err
	}
	if err := c.intra("BcastObj"); err != nil {
		return err
	}
	if _, err := c.peerRank("BcastObj", root, false); err != nil {
		return errorf(ErrRoot, "BcastObj", "root %d not in %s", root, c.name)
	}
	var b []byte
	var rootErr error
	n := []int64{0}
	if c.rank == root {
		// A value that cannot be encoded goes as a size of -1, as in the
		// object collectives (objcoll.go): the others learn the call
		// failed, and why (they failed with a mismatched count instead).
		b, n[0], rootErr = objBytes("BcastObj", v)
	}
	if err := Bcast(c, n, root); err != nil {
		return err
	}
	if n[0] < 0 {
		if rootErr != nil {
			return rootErr
		}
		return errorf(ErrArg, "BcastObj", "root %d's value could not be encoded (see its error)", root)
	}
	if c.rank != root {
		b = make([]byte, n[0])
	}
	if err := Bcast(c, b, root); err != nil {
		return err
	}
	if c.rank != root {
		if err := msgpack.Unmarshal(b, v); err != nil {
			return errorf(ErrArg, "BcastObj", "decode into %T: %w", v, fmt.Errorf("%w", err))
		}
	}
	return nil
}
