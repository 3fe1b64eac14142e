package launcher

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"sync"
)

// output serializes whole lines from every rank onto one writer, so lines
// are never torn or interleaved.
type output struct {
	mu  sync.Mutex
	w   io.Writer
	tag bool
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
			if o.tag {
				o.w.Write(append(prefix[:len(prefix):len(prefix)], line...))
			} else {
				o.w.Write(line)
			}
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
	if l.o.tag {
		l.o.w.Write(append(l.prefix[:len(l.prefix):len(l.prefix)], l.line...))
	} else {
		l.o.w.Write(l.line)
	}
	l.o.mu.Unlock()
	l.line = l.line[:0]
}
