package msglines

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/streamrun/streamrun/pulsarwire"
)

// MaxLine is the longest line read: a message the brokers take.
const MaxLine = pulsarwire.DefaultMaxMessageSize

// Line is a line of an input that is not blank, and its number (from 1).
type Line struct {
	N    int
	Text []byte
}

// Lines reads an input's lines on a goroutine of its own, so that an
// input that blocks (a terminal on stdin) does not hold up whoever reads
// it: the goroutine ends at the end of the input, or at its next line
// once the context given to Read has ended. Blank lines (nothing but
// spaces) are skipped.
type Lines struct {
	name  string
	lines chan Line
	errc  chan error
}

// Read starts reading r, called name in errors, until its end or until
// ctx ends.
func Read(ctx context.Context, name string, r io.Reader) *Lines {
	l := &Lines{name: name, lines: make(chan Line), errc: make(chan error, 1)}
	go l.read(ctx, r)
	return l
}

func (l *Lines) read(ctx context.Context, r io.Reader) {
	defer close(l.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if ctx.Err() != nil {
			l.errc <- nil // the line came after the end: not given
			return
		}
		select {
		case l.lines <- Line{n, bytes.Clone(sc.Bytes())}:
		case <-ctx.Done():
			l.errc <- nil
			return
		}
	}
	if err := sc.Err(); err != nil {
		l.errc <- fmt.Errorf("read %s (line %d): %w", l.name, n+1, err)
		return
	}
	l.errc <- nil
}

// Next is the next line; false at the end of the input, with the error
// that ended it (nil at its end, or once Read's context ended), or when
// ctx ends (no error: the caller knows why).
func (l *Lines) Next(ctx context.Context) (Line, bool, error) {
	select {
	case <-ctx.Done():
		return Line{}, false, nil
	case line, ok := <-l.lines:
		if !ok {
			return Line{}, false, <-l.errc
		}
		return line, true, nil
	}
}
