package launcher

import (
	"bytes"
	"sync"
	"testing"
)

// syncBuf is a bytes.Buffer safe for the writers of one output.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOpenLine: a rank's unfinished line, once shown, keeps the line: a
// second rank's line follows it after its end, never inside it; a line
// left open by a stream that ended is ended before the next one.
func TestOpenLine(t *testing.T) {
	for _, tag := range []bool{false, true} {
		var w syncBuf
		o := newOutput(&w, tag)
		a, b := o.lineWriter(0, "stdout"), o.lineWriter(1, "stdout")
		a.Write([]byte("progress 10%"))
		a.partial() // what the timer does after GORUN_OUTPUT_PARTIAL
		done := make(chan struct{})
		go func() { b.Write([]byte("other rank\n")); close(done) }()
		a.Write([]byte("\rprogress 100%\n"))
		<-done
		a.Write([]byte("prompt> "))
		a.Close() // leaves its line open
		b.Write([]byte("after\n"))
		want := "progress 10%\rprogress 100%\nother rank\nprompt> \nafter\n"
		if tag {
			want = "[1,0]<stdout>:progress 10%\rprogress 100%\n[1,1]<stdout>:other rank\n[1,0]<stdout>:prompt> \n[1,1]<stdout>:after\n"
		}
		if got := w.String(); got != want {
			t.Errorf("tag %v:\n got %q\nwant %q", tag, got, want)
		}
	}
}
