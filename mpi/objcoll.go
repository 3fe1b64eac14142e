package mpi

import (
	"github.com/vmihailenco/msgpack/v5"
)

// Object collectives: GatherObj, AllgatherObj and ScatterObj move any
// msgpack-encodable values, one per rank, like mpi4py's gather, allgather
// and scatter. Each is two collectives: the encoded sizes, then the bytes
// (Gatherv, Allgatherv, Scatterv). A value that cannot be encoded at some
// rank does not leave the others waiting: that rank takes part with a
// size of -1 and no bytes, and every rank that would have received the
// value fails with ErrArg naming the rank, as the rank itself does.

// objBytes encodes v, or returns a size of -1 and the error.
func objBytes(op string, v any) ([]byte, int64, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, -1, errorf(ErrArg, op, "encode %T: %w", v, err)
	}
	return b, int64(len(b)), nil
}

// objLayout turns the gathered sizes into counts and displacements, or
// names the first rank whose value could not be encoded.
func objLayout(op string, sizes []int64) (counts, displs []int, total int, err error) {
	counts, displs = make([]int, len(sizes)), make([]int, len(sizes))
	for r, n := range sizes {
		if n < 0 {
			err = errorf(ErrArg, op, "rank %d could not encode its value", r)
			n = 0
		}
		counts[r], displs[r] = int(n), total
		total += int(n)
	}
	return counts, displs, total, err
}

// objDecode decodes the values of every rank from the gathered bytes.
func objDecode[T any](op string, buf []byte, counts, displs []int) ([]T, error) {
	out := make([]T, len(counts))
	for r := range counts {
		if err := msgpack.Unmarshal(buf[displs[r]:displs[r]+counts[r]], &out[r]); err != nil {
			return nil, errorf(ErrArg, op, "decode the value of rank %d (%d bytes) into %T: %w", r, counts[r], out[r], err)
		}
	}
	return out, nil
}

// GatherObj gathers every rank's v at root, in rank order: root gets the
// values, the other ranks nil.
func GatherObj[T any](c *Comm, v T, root int) ([]T, error) {
	const op = "GatherObj"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.checkRoot(op, root); err != nil {
		return nil, err
	}
	b, n, encErr := objBytes(op, v)
	sizes := make([]int64, c.Size())
	if err := Gather(c, []int64{n}, sizes, root); err != nil {
		return nil, reop(op, err)
	}
	var counts, displs []int
	var buf []byte
	var layErr error
	if c.rank == root {
		var total int
		counts, displs, total, layErr = objLayout(op, sizes)
		buf = make([]byte, total)
	}
	if err := Gatherv(c, b, buf, counts, displs, root); err != nil {
		return nil, reop(op, err)
	}
	switch {
	case encErr != nil:
		return nil, encErr
	case layErr != nil:
		return nil, layErr
	case c.rank != root:
		return nil, nil
	}
	return objDecode[T](op, buf, counts, displs)
}

// AllgatherObj gathers every rank's v at every rank, in rank order.
func AllgatherObj[T any](c *Comm, v T) ([]T, error) {
	const op = "AllgatherObj"
	if err := c.check(op); err != nil {
		return nil, err
	}
	b, n, encErr := objBytes(op, v)
	sizes := make([]int64, c.Size())
	if err := Allgather(c, []int64{n}, sizes); err != nil {
		return nil, reop(op, err)
	}
	counts, displs, total, layErr := objLayout(op, sizes)
	buf := make([]byte, total)
	if err := Allgatherv(c, b, buf, counts, displs); err != nil {
		return nil, reop(op, err)
	}
	if encErr != nil {
		return nil, encErr
	}
	if layErr != nil {
		return nil, layErr
	}
	return objDecode[T](op, buf, counts, displs)
}

// ScatterObj sends vs[r] from root to rank r and returns this rank's
// value; vs is read at root only, where it must hold one value per rank.
// When root's vs is wrong (its length, or a value that cannot be encoded)
// every rank fails with ErrArg.
func ScatterObj[T any](c *Comm, vs []T, root int) (T, error) {
	const op = "ScatterObj"
	var zero T
	if err := c.check(op); err != nil {
		return zero, err
	}
	if err := c.checkRoot(op, root); err != nil {
		return zero, err
	}
	n := c.Size()
	var sizes []int64
	var buf []byte
	var counts, displs []int
	var rootErr error
	if c.rank == root {
		sizes = make([]int64, n)
		if len(vs) != n {
			rootErr = errorf(ErrArg, op, "root has %d values for %d ranks", len(vs), n)
		}
		var parts [][]byte
		for r := 0; r < n && rootErr == nil; r++ {
			b, _, err := objBytes(op, vs[r])
			if err != nil {
				rootErr = errorf(ErrArg, op, "value for rank %d: %w", r, err)
			}
			parts = append(parts, b)
		}
		if rootErr != nil {
			for r := range sizes {
				sizes[r] = -1 // everyone learns the call failed
			}
			parts = nil
		}
		counts, displs = make([]int, n), make([]int, n)
		for r, b := range parts {
			sizes[r] = int64(len(b))
			counts[r], displs[r] = len(b), len(buf)
			buf = append(buf, b...)
		}
	}
	mine := make([]int64, 1)
	if err := Scatter(c, sizes, mine, root); err != nil {
		return zero, reop(op, err)
	}
	if mine[0] < 0 {
		if rootErr != nil {
			return zero, rootErr
		}
		return zero, errorf(ErrArg, op, "root %d's values were wrong (see its error)", root)
	}
	b := make([]byte, mine[0])
	if err := Scatterv(c, buf, counts, displs, b, root); err != nil {
		return zero, reop(op, err)
	}
	var v T
	if err := msgpack.Unmarshal(b, &v); err != nil {
		return zero, errorf(ErrArg, op, "decode %d bytes from root %d into %T: %w", len(b), root, v, err)
	}
	return v, nil
}
