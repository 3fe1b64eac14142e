package mpi

// SendrecvReplace sends buf to dest and receives into the same buf from
// source at once (MPI_Sendrecv_replace): the outgoing values are copied
// aside first, so the received message may be as long as buf. A message
// longer than buf fills it and fails with ErrTruncate.
func SendrecvReplace[T Numeric](c *Comm, buf []T, dest, sendtag, source, recvtag int) (Status, error) {
	out := buf
	if dest != ProcNull && len(buf) > 0 {
		out = make([]T, len(buf))
		copy(out, buf)
	}
	st, err := Sendrecv(c, out, dest, sendtag, buf, source, recvtag)
	return st, reop("SendrecvReplace", err)
}
