package p2p

// queue is a matching queue (posted receives, unexpected messages): a FIFO
// that removes at any index. Matching nearly always takes the oldest entry
// (in-order traffic), which costs O(1) here: removing the head of a plain
// slice moved every other entry, 63 pointer writes per message with a
// window of 64 (BenchmarkWindowSelf; with the garbage collector running,
// each one a write barrier). Elsewhere it shifts the shorter side. It
// reuses its array: push moves the entries back to its start before
// growing, so a steady stream allocates nothing.
type queue[T comparable] struct {
	buf  []T // buf[head:] are the entries, oldest first
	head int
}

// items returns the entries, oldest first; valid until the next change.
func (q *queue[T]) items() []T { return q.buf[q.head:] }

func (q *queue[T]) len() int { return len(q.buf) - q.head }

func (q *queue[T]) push(v T) {
	if len(q.buf) == cap(q.buf) && q.head > 0 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

// remove deletes items()[i].
func (q *queue[T]) remove(i int) {
	var zero T
	j := q.head + i
	if i < len(q.buf)-j-1 {
		copy(q.buf[q.head+1:j+1], q.buf[q.head:j])
		q.buf[q.head] = zero
		q.head++
	} else {
		copy(q.buf[j:], q.buf[j+1:])
		q.buf[len(q.buf)-1] = zero
		q.buf = q.buf[:len(q.buf)-1]
	}
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// index returns the index in items() of v, or -1.
func (q *queue[T]) index(v T) int {
	for i, x := range q.items() {
		if x == v {
			return i
		}
	}
	return -1
}

// filter keeps the entries for which keep is true, in order.
func (q *queue[T]) filter(keep func(T) bool) {
	var zero T
	n := q.head
	for _, v := range q.items() {
		if keep(v) {
			q.buf[n] = v
			n++
		}
	}
	for k := n; k < len(q.buf); k++ {
		q.buf[k] = zero
	}
	q.buf = q.buf[:n]
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// reset empties the queue and lets its array go.
func (q *queue[T]) reset() { q.buf, q.head = nil, 0 }
