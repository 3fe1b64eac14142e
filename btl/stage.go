package btl

// Stager is the optional capability of a module that copies between device
// memory and host memory of this process with the GPU's copy engines
// (btl/cuda). p2p uses it to move device memory over routes that no RMA
// reaches (another host over tcp, a GPU without IPC): the sender copies the
// message to host memory chunk by chunk and sends each chunk as a frame
// while the next is being copied, and the receiver copies each arriving
// chunk to the device (doc.go, "Staging"). A message up to the route's
// eager limit is copied whole (StageOp.Eager) and goes as one eager frame
// once its copy is done.
//
// Every method is called with the engine lock held.
type Stager interface {
	// StageKinds is the set of memory kinds Stage reaches (device memory);
	// p2p stages a buffer whose kind is in it.
	StageKinds() Kinds
	// HostBuffer returns n bytes of page-locked (pinned) host memory to
	// stage through, from a bounded pool, or nil when the pool has none to
	// give now (copies from pageable memory are slower and not
	// asynchronous: a sender waits for a buffer, a receiver, which cannot
	// refuse a chunk, lands it in plain memory). Give it back with
	// ReleaseHost once no copy or frame uses it. dev is the device the
	// copies will go to or from (memory is pinned in its context).
	HostBuffer(dev, n int) []byte
	// ReleaseHost returns a buffer from HostBuffer.
	ReleaseHost(b []byte)
	// Stage starts the copy op describes. A nil error means it was
	// accepted: op.Owner.StageDone is called exactly once, from inside the
	// call or a later Progress, when the bytes are in place (for a copy to
	// the device: visible to every stream), or with the error that ended
	// it. An error means nothing started. Until StageDone, op and both
	// buffers stay valid and untouched by the caller.
	Stage(op *StageOp) error
	// StageChunk is the chunk size of the staging pipeline: a frame's worth
	// of host memory, large enough to run the copy engines near their
	// speed and small enough that copying one chunk overlaps sending the
	// previous one.
	StageChunk() int
}

// StageOp is one copy between device and host memory, owned by the caller.
type StageOp struct {
	Dev  Mem
	Host []byte // as long as Dev
	// ToHost: device to host; else host to device.
	ToHost bool
	// Eager: the copy of a whole eager message, queued apart from the
	// pipeline's chunks (its own stream) so that it does not wait behind
	// them: a chunk of the pipeline takes milliseconds, an eager message
	// microseconds.
	Eager bool
	Owner StageCompleter
}

// StageCompleter is told when a staging copy ends, with the engine lock
// held, from inside Stage or Progress; it must not block.
type StageCompleter interface {
	StageDone(op *StageOp, err error)
}
