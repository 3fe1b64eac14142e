package cuda

import (
	"fmt"
	"sync/atomic"
	"time"
)

// EventFlags select cuEventCreate's options.
type EventFlags uint32

// cuEventCreate flags (cuda.h).
const (
	// EventDefault records timing.
	EventDefault EventFlags = 0x0
	// EventBlockingSync makes Synchronize sleep instead of spinning.
	EventBlockingSync EventFlags = 0x1
	// EventDisableTiming makes the event cheaper; required for IPC events.
	EventDisableTiming EventFlags = 0x2
	// EventInterprocess lets the event be shared with IPCHandle (needs
	// EventDisableTiming too).
	EventInterprocess EventFlags = 0x4
)

// Event marks a point in a stream (CUevent): it completes when the work
// queued before it does.
type Event struct {
	ctx       *Context
	h         uintptr
	destroyed atomic.Bool
}

// NewEvent creates an event.
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	h, r := drvEventCreate(c.h, uint32(flags))
	if err := check("cuEventCreate", r); err != nil {
		return nil, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return &Event{ctx: c, h: h}, nil
}

// Context returns the event's context.
func (e *Event) Context() *Context { return e.ctx }

// Destroy releases the event. A second Destroy is a no-op.
func (e *Event) Destroy() error {
	if e.destroyed.Swap(true) {
		return nil
	}
	return check("cuEventDestroy_v2", drvEventDestroy(e.ctx.h, e.h))
}

// Record marks the current end of stream s's queue.
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", drvEventRecord(e.ctx.h, e.h, s.h))
}

// Synchronize blocks until the event has completed.
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", drvEventSynchronize(e.ctx.h, e.h))
}

// Done reports, without blocking, whether the event has completed.
func (e *Event) Done() (bool, error) {
	r := drvEventQuery(e.ctx.h, e.h)
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("cuEventQuery", r)
}

// Elapsed returns the device time between two completed events of one
// device, recorded with timing enabled (resolution about 0.5 µs).
func Elapsed(start, end *Event) (time.Duration, error) {
	ms, r := drvEventElapsedTime(start.ctx.h, start.h, end.h)
	if err := check("cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
