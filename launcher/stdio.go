package launcher

import (
	"bufio"
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

// printf writes one of gorun's own messages, whole.
func (o *output) println(s string) {
	o.mu.Lock()
	io.WriteString(o.w, s+"\n")
	o.mu.Unlock()
}
