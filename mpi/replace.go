package mpi

// SendrecvReplace sends buf to dest and receives into the same buf from
// source at once (MPI_Sendrecv_replace): the outgoing values are copied
// aside first, so the received message may be as long as buf. A message
// longer than buf fills it and fails with ErrTruncate.
func SendrecvReplace[T Numeric](c *Comm, buf []T, dest, sendtag, source, recvtag int) (Status, error) {
	// Sendrecv sends a copy of a buffer that is also its receive buffer.
	st, err := sendrecv("SendrecvReplace", c, buf, dest, sendtag, buf, source, recvtag)
	return st, c.fail(err)
}
