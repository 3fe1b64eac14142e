package p2p

import "errors"

// Sentinel errors; package mpi maps them to MPI error classes.
var (
	// ErrTruncate: the message was longer than the receive buffer. The
	// buffer holds the message's first bytes and the status its source and
	// tag.
	ErrTruncate = errors.New("message truncated: receive buffer too small")
	// ErrProcFailed: the peer is gone (its connection broke or it was
	// declared dead).
	ErrProcFailed = errors.New("peer process failed")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("p2p engine closed")
	// ErrProtocol: a peer sent a frame that makes no sense here.
	ErrProtocol = errors.New("protocol error")
	// ErrNoDevicePath: a buffer in device memory met a route that reaches
	// it neither by RMA nor by a host staging pipeline (no module stages
	// device memory: no GPU transport).
	// Nothing was transferred.
	ErrNoDevicePath = errors.New("device memory cannot travel this route (no GPU transport to reach or stage it)")
)
