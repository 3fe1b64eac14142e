package coll

// span returns the bytes of blocks [lo, hi) of buf and whether they are
// contiguous (they are when each block starts where the previous ends).
func span(buf []byte, counts, displs []int, lo, hi int) ([]byte, bool) {
	if lo >= hi {
		return buf[:0], true
	}
	for i := lo; i+1 < hi; i++ {
		if displs[i]+counts[i] != displs[i+1] {
			return nil, false
		}
	}
	return buf[displs[lo] : displs[hi-1]+counts[hi-1]], true
}

// runSteps executes a block schedule on buf, whose blocks are given by
// counts and displs (bytes). A contiguous range travels as one message,
// another block by block; both sides see the same layout and so the same
// messages. Reduce steps receive into tmp (at least as long as the
// largest received range) and fold it into buf with op as soon as it has
// arrived, while the step's send may still be in flight (a step never
// sends the blocks it folds).
//
// own, when not nil, is this rank's contribution with buf's layout, and
// buf does not hold it yet: a block is then sent from own until a step has
// written it into buf, and a Reduce step computes buf = received ⊕ own
// from it (fold3), which spares copying own into buf first. That is right
// for schedules in which every fold combines received data with this
// rank's own contribution only (ring reduce-scatter, recursive halving).
func runSteps(c *Comm, steps []step, buf []byte, counts, displs []int, op Op, tmp, own []byte) error {
	var written []bool
	if own != nil {
		written = make([]bool, len(counts))
	}
	// source returns where blocks [lo, hi) are sent from.
	source := func(lo, hi int) []byte {
		if own == nil {
			return buf
		}
		all, none := true, true
		for i := lo; i < hi; i++ {
			all, none = all && written[i], none && !written[i]
		}
		switch {
		case all:
			return buf
		case none:
			return own
		}
		for i := lo; i < hi; i++ { // a mixed range: complete buf
			if !written[i] {
				copy(buf[displs[i]:displs[i]+counts[i]], own[displs[i]:displs[i]+counts[i]])
				written[i] = true
			}
		}
		return buf
	}
	var recvs, sends pending
	for _, s := range steps {
		var rbufs, dsts [][]byte
		var los []int
		if s.From >= 0 {
			if b, ok := span(buf, counts, displs, s.RecvLo, s.RecvHi); ok {
				dsts, los = append(dsts, b), append(los, s.RecvLo)
			} else {
				for i := s.RecvLo; i < s.RecvHi; i++ {
					dsts, los = append(dsts, buf[displs[i]:displs[i]+counts[i]]), append(los, i)
				}
			}
			off := 0
			for _, d := range dsts {
				rb := d
				if s.Reduce {
					rb = tmp[off : off+len(d)]
					off += len(d)
				}
				rbufs = append(rbufs, rb)
				if err := recvs.recv(c, rb, s.From); err != nil {
					return err
				}
			}
		}
		if s.To >= 0 {
			src := source(s.SendLo, s.SendHi)
			if b, ok := span(src, counts, displs, s.SendLo, s.SendHi); ok {
				if err := sends.send(c, b, s.To); err != nil {
					return err
				}
			} else {
				for i := s.SendLo; i < s.SendHi; i++ {
					if err := sends.send(c, src[displs[i]:displs[i]+counts[i]], s.To); err != nil {
						return err
					}
				}
			}
		}
		if err := recvs.wait(c); err != nil {
			return err
		}
		for i, d := range dsts {
			if s.Reduce {
				lo := displs[los[i]]
				if own != nil && !written[los[i]] {
					fold3(op, rbufs[i], own[lo:lo+len(d)], d)
				} else {
					op.Apply(rbufs[i], d)
				}
			}
		}
		if own != nil && s.From >= 0 {
			for i := s.RecvLo; i < s.RecvHi; i++ {
				written[i] = true
			}
		}
		if err := sends.wait(c); err != nil {
			return err
		}
	}
	return nil
}
