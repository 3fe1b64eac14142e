// Package mpi is gorun's public API: the MPI model for Go programs.
//
//	if err := mpi.Init(); err != nil { log.Fatal(err) }
//	defer mpi.Finalize()
//	w := mpi.World()
//	if w.Rank() == 0 {
//		mpi.Send(w, []float64{1, 2, 3}, 1, 0)
//	} else if w.Rank() == 1 {
//		buf := make([]float64, 3)
//		st, err := mpi.Recv(w, buf, 0, mpi.AnyTag)
//		if err != nil { log.Fatal(err) }
//		fmt.Println(buf, "with tag", st.Tag)
//	}
//
// Programs are started by gorun (`gorun -np 4 ./prog`); without it Init gives
// a singleton world of size 1.
//
// Buffers are Go slices of any numeric type (Numeric). They are handed to
// the transports without copying: for a nonblocking call, the slice must
// stay untouched until its Request completes. Counts are in elements of the
// slice's type; a received message's length is in Status.
//
// GPU memory: a gpu.Buffer (gpu.Alloc, or gpu.Wrap(dev, ptr, dtype, count)
// around a CUDA pointer and length from another library, such as PyTorch's
// tensor.data_ptr()) goes to SendGPU, RecvGPU, IsendGPU, IrecvGPU,
// SendrecvGPU and the collectives AllreduceGPU, ReduceGPU, BcastGPU,
// AllgatherGPU, AllgathervGPU, ReduceScatterBlockGPU, ReduceScatterGPU,
// GatherGPU, GathervGPU, ScatterGPU, ScattervGPU, AlltoallGPU,
// AlltoallvGPU, ScanGPU and ExscanGPU, each also nonblocking
// (IallreduceGPU & co., returning a Request). The zero gpu.Buffer, or the
// receive buffer itself, as the send buffer means in place (devcoll.go and
// devcollv.go say where; AlltoallGPU and AlltoallvGPU go through a scratch
// copy); v forms take counts and displacements in elements; reductions
// take Sum, Prod, Min and Max. ReduceScatterGPU (per-rank counts) runs as
// an AllreduceGPU of the whole vector (docs/gpu.md). device.go and
// devcoll.go say how these calls order against CUDA streams: synchronize
// the streams that wrote a send buffer before the call; when a call
// returns (or its request completes) its result is visible to every
// stream of the device. Without a usable GPU these calls fail with
// ErrBuffer on every rank involved and the job goes on.
//
// Non-contiguous data (MPI's derived datatypes) is described by a Layout
// applied to a slice: Vector for a matrix column, Subarray for a halo or
// a tile, Indexed and IndexedBlock, composed with Of and Resized; the
// ...Layout calls (SendLayout, RecvLayout, IsendLayout, IrecvLayout,
// SendrecvLayout, BcastLayout, GatherLayout, ScatterLayout,
// AllgatherLayout) and Pack/Unpack take one (layout.go).
//
// Any msgpack-encodable value goes through the object API (SendObj,
// RecvObj, BcastObj, GatherObj, AllgatherObj, ScatterObj), like mpi4py's
// lower-case methods.
//
// Requests: Wait, Test and their Waitall/Waitany/Waitsome/Testall/
// Testany/Testsome forms complete them; Waitall's error holds every
// request's error (*RequestErrors), and WaitallInto takes the caller's
// status slice, or nil to ignore statuses (MPI_STATUSES_IGNORE), so that
// a loop at the message rate allocates no statuses. A Request stays valid
// as long as it is held (repeated Waits agree), so each Isend and Irecv
// makes one, except where WaitallFree completes them: it sets the
// entries to nil, as MPI_Waitall sets its handles to MPI_REQUEST_NULL,
// and reuses the requests, for loops where nothing else holds them.
// Receives can be cancelled
// (Request.Cancel) or given up with a context (Request.WaitContext), and
// persistent requests (SendInit, RecvInit, Start, and the collectives'
// BarrierInit, AllreduceInit, ...) run one operation many times. Mprobe and Mrecv receive a probed message without a race.
// Intercommunicators (Comm.IntercommCreate, Merge) join two groups;
// intercomm.go says which calls take them. README.md's table lists what
// of MPI is covered and what is not.
//
// Errors are returned, never panicked, and carry MPI error classes usable
// with errors.Is (errors.Is(err, mpi.ErrTruncate)). A receive into a buffer
// that is too small fails with ErrTruncate and the job goes on. When a rank
// dies, gorun ends the job (MPI's errors-are-fatal default); operations
// that involve the dead rank fail with ErrProcFailed meanwhile. Under
// `gorun --enable-recovery` the job goes on instead, and the survivors
// recover with Comm.Revoke, Comm.Shrink and Comm.Agree (ULFM, as in MPI
// 5.0; ulfm.go says what a failed call may have done and what is safe to
// retry).
//
// Concurrency: every function may be called from any goroutine
// (MPI_THREAD_MULTIPLE); blocking calls poll the transports in the calling
// goroutine. As in MPI, collectives (communicator constructors included)
// on one communicator must be called in the same order by every process,
// so concurrent ones need different communicators; constructors on
// different parents may run at once from several goroutines, in any order
// at each process (mpi/ctxid.go says how their context ids are agreed).
// At most 4096 communicators are alive at once; the next constructor then
// fails with ErrOther at every process.
//
// Data is exchanged in the machine's byte order; all ranks of a job must
// share it (gorun does not convert between architectures).
package mpi
