package launcher

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"
	"syscall"
)

// output serializes whole lines from every rank onto one writer, so lines
// are never torn or interleaved.
type output struct {
	mu  sync.Mutex
	w   io.Writer
	tag bool
	// closed: the reader of w went away (EPIPE: `gorun ... | head`);
	// later lines are dropped and onClosed was called, once, to end the
	// job.
	closed   bool
	onClosed func()
}

// write writes one whole line (prefixed when tagging); the lock is held.
func (o *output) write(prefix, line []byte) {
	if o.closed {
		return
	}
	var err error
	if o.tag {
		_, err = o.w.Write(append(prefix[:len(prefix):len(prefix)], line...))
	} else {
		_, err = o.w.Write(line)
	}
	if errors.Is(err, syscall.EPIPE) {
		o.closed = true
		if o.onClosed != nil {
			go o.onClosed()
		}
	}
}

// maxLine bounds the bytes held for one line; longer lines are written in
// pieces of this size (each piece still whole and unmixed).
const maxLine = 1 << 20

// forward copies r to o line by line until EOF, prefixing lines with the
// rank when tagging is on.
func (o *output) forward(rank int, stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	prefix := []byte("[" + strconv.Itoa(rank) + "," + stream + "] ")
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull && len(line) < maxLine {
			continue
		}
		if len(line) > 0 {
			o.mu.Lock()
			o.write(prefix, line)
			o.mu.Unlock()
			line = line[:0]
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// println writes one of gorun's own messages, whole.
func (o *output) println(s string) {
	o.mu.Lock()
	io.WriteString(o.w, s+"\n")
	o.mu.Unlock()
}

// lineWriter assembles the chunks of one remote rank's stream into whole
// lines on o, as forward does for a local pipe. It is used by one
// goroutine (the host's reader).
type lineWriter struct {
	o      *output
	prefix []byte
	line   []byte
}

func (o *output) lineWriter(rank int, stream string) *lineWriter {
	return &lineWriter{o: o, prefix: []byte("[" + strconv.Itoa(rank) + "," + stream + "] ")}
}

// Write writes every complete line of p and keeps the rest.
func (l *lineWriter) Write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.line = append(l.line, p...)
			if len(l.line) >= maxLine {
				l.flush()
			}
			return
		}
		l.line = append(l.line, p[:i+1]...)
		l.flush()
		p = p[i+1:]
	}
}

// Close writes a last line that has no newline.
func (l *lineWriter) Close() { l.flush() }

func (l *lineWriter) flush() {
	if len(l.line) == 0 {
		return
	}
	l.o.mu.Lock()
	l.o.write(l.prefix, l.line)
	l.o.mu.Unlock()
	l.line = l.line[:0]
}
