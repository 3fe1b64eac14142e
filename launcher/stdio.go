package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorun/gorun/internal/params"
)

// Output forwarding. Every rank's stdout (and stderr) goes through one
// output, which owns gorun's writer: a line is written whole, never with
// another rank's bytes inside it. A rank's unfinished line (a prompt, a
// '\r' progress bar) is written once the rank has paused for
// pOutPartial, so it shows at once rather than when a newline finally
// comes; the line then stays open for that rank, and other ranks' lines
// are held (never blocking their readers: one reader serves all ranks of
// a host) until it ends, for at most pOutHold, after which gorun
// ends the open line with a newline of its own and the rank's next bytes
// start a new one (tagged again with --tag-output). Either way no line
// ever mixes two ranks.

var (
	pOutPartial = params.Duration("GORUN_OUTPUT_PARTIAL", 50*time.Millisecond,
		"how long a rank's unfinished output line (no newline yet: a prompt, a progress bar) waits for more before gorun shows it")
	pOutHold = params.Duration("GORUN_OUTPUT_HOLD", time.Second,
		"how long another rank's line waits for a rank's open (unfinished, shown) line to end before gorun ends it with a newline")
)

// output serializes the lines of every rank onto one writer.
type output struct {
	mu  sync.Mutex
	w   io.Writer
	tag bool
	// open is the stream whose unfinished line is on w (nil: w is at the
	// start of a line).
	open *lineWriter
	// queue holds, in order, the streams with lines waiting for the open
	// line to end (their bytes in lineWriter.held); hold ends the open
	// line after pOutHold.
	queue []*lineWriter
	hold  *time.Timer
	// closed: the reader of w went away (EPIPE: `gorun ... | head`);
	// later lines are dropped and onClosed was called, once, to end the
	// job.
	closed   bool
	onClosed func()
	// dir, when set (--output-filename), also receives each rank's
	// stream in dir/1/rank.N/stdout (Open MPI 4.1's layout).
	dir string
	// errs receives a failure to create or write those files, once.
	errs func(string)
}

func newOutput(w io.Writer, tag bool) *output {
	return &output{w: w, tag: tag}
}

// tagFromNow prefixes every line from now on with its rank's tag, as
// --tag-output does: a stack dump of every rank (dumpStacks) is otherwise
// a run of goroutine stacks that do not say whose they are.
func (o *output) tagFromNow() {
	o.mu.Lock()
	o.tag = true
	o.mu.Unlock()
}

// emit writes b (whole lines, perhaps ending in an unfinished one) for l,
// or holds it while another stream's line is open; o.mu is held.
func (o *output) emit(l *lineWriter, b []byte) {
	if len(l.held) > 0 || (o.open != nil && o.open != l && !o.open.ended) {
		if len(l.held) == 0 {
			o.queue = append(o.queue, l)
		}
		l.held = append(l.held, b...)
		if o.hold == nil {
			o.hold = time.AfterFunc(pOutHold(), o.endOpen)
		}
		return
	}
	o.put(l, b)
	o.drain()
}

// put writes b for l, prefixing each line when tagging; o.mu is held.
func (o *output) put(l *lineWriter, b []byte) {
	if o.open != nil && o.open != l {
		o.raw([]byte("\n")) // end the line its stream left open
		o.open = nil
	}
	if !o.tag && len(b) > 0 {
		o.raw(b) // every line at once: one write
		o.open = nil
		if b[len(b)-1] != '\n' {
			o.open = l
		}
		return
	}
	for len(b) > 0 {
		seg := b
		i := bytes.IndexByte(b, '\n')
		if i >= 0 {
			seg = b[:i+1]
		}
		if o.tag && o.open != l {
			o.raw(append(l.prefix[:len(l.prefix):len(l.prefix)], seg...))
		} else {
			o.raw(seg)
		}
		if i < 0 {
			o.open = l
			return
		}
		o.open = nil
		b = b[i+1:]
	}
}

// drain writes the held streams' bytes while no line is open; o.mu is
// held.
func (o *output) drain() {
	for len(o.queue) > 0 && (o.open == nil || o.open.ended) {
		l := o.queue[0]
		o.queue = o.queue[1:]
		b := l.held
		l.held = nil
		o.put(l, b)
	}
	if len(o.queue) == 0 && o.hold != nil {
		o.hold.Stop()
		o.hold = nil
	}
}

// endOpen ends a line left open for pOutHold while others wait.
func (o *output) endOpen() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hold = nil
	if o.open != nil {
		o.raw([]byte("\n"))
		o.open = nil
	}
	o.drain()
	if len(o.queue) > 0 && o.hold == nil { // a held stream left its line open in turn
		o.hold = time.AfterFunc(pOutHold(), o.endOpen)
	}
}

// raw writes b to w; the lock is held.
func (o *output) raw(b []byte) {
	if o.closed {
		return
	}
	if _, err := o.w.Write(b); errors.Is(err, syscall.EPIPE) {
		o.closed = true
		if o.onClosed != nil {
			go o.onClosed()
		}
	}
}

// maxLine bounds the bytes held for one line; longer lines are written in
// pieces of this size (each piece still whole and unmixed).
const maxLine = 1 << 20

// println writes one of gorun's own messages, whole.
func (o *output) println(s string) {
	o.mu.Lock()
	if o.open != nil {
		o.raw([]byte("\n")) // a rank's open line ends before gorun speaks
		o.open = nil
	}
	io.WriteString(o.w, s+"\n")
	o.drain()
	o.mu.Unlock()
}

// lineWriter assembles the chunks of one rank's stream into lines on o,
// showing an unfinished line once the stream pauses. Write is called by one
// goroutine (the reader of its host agent's stream); the partial-line
// timer is the only other.
type lineWriter struct {
	o      *output
	prefix []byte
	mu     sync.Mutex // guards line, timer, file
	line   []byte
	timer  *time.Timer
	file   *os.File // --output-filename's file, or nil
	// ended: the stream is closed; a line it left open is ended by the
	// next writer at once. held: its bytes waiting for another stream's
	// open line to end. Both guarded by o.mu.
	ended bool
	held  []byte
}

// checkOutputDir makes dir/1, where --output-filename's files go
// (lineWriter), and checks that a file can be created there.
func checkOutputDir(dir string) error {
	d := filepath.Join(dir, "1")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(d, ".gorun-check-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

func (o *output) lineWriter(rank int, stream string) *lineWriter {
	// Open MPI's tag: [job,rank]<stream>: (its first job is 1).
	l := &lineWriter{o: o, prefix: []byte("[1," + strconv.Itoa(rank) + "]<" + stream + ">:")}
	if o.dir != "" {
		d := filepath.Join(o.dir, "1", "rank."+strconv.Itoa(rank))
		err := os.MkdirAll(d, 0o755)
		if err == nil {
			l.file, err = os.Create(filepath.Join(d, stream))
		}
		if err != nil && o.errs != nil {
			o.errs(fmt.Sprintf("gorun: --output-filename: %v", err))
		}
	}
	return l
}

// Write writes every complete line of p and keeps the rest, shown after
// pOutPartial unless more comes.
func (l *lineWriter) Write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		if _, err := l.file.Write(p); err != nil && l.o.errs != nil {
			l.o.errs(fmt.Sprintf("gorun: --output-filename: %v", err))
			l.file.Close()
			l.file = nil
		}
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		// Every complete line at once; the rest waits.
		l.line = append(l.line, p[:i+1]...)
		l.flush()
		p = p[i+1:]
	}
	l.line = append(l.line, p...)
	if len(l.line) >= maxLine {
		l.flush()
	}
	if len(l.line) > 0 {
		if l.timer == nil {
			l.timer = time.AfterFunc(pOutPartial(), l.partial)
		} else {
			l.timer.Reset(pOutPartial())
		}
	}
}

// partial shows the unfinished line after a pause.
func (l *lineWriter) partial() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flush()
}

// Close writes a last line that has no newline; the output's line stays
// open until another rank writes.
func (l *lineWriter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.flush()
	l.o.mu.Lock()
	l.ended = true
	l.o.drain()
	l.o.mu.Unlock()
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

// flush passes the bytes gathered to the output; l.mu is held.
func (l *lineWriter) flush() {
	if len(l.line) == 0 {
		return
	}
	l.o.mu.Lock()
	l.o.emit(l, l.line)
	l.o.mu.Unlock()
	l.line = l.line[:0]
}
