package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
)

// messageSource gives produce its messages one at a time: made from the
// flags, or read from --input.
type messageSource interface {
	// next is the next message; false at the end (or once ctx ended).
	next(ctx context.Context) (pool.Message, bool, error)
	// total is how many messages there are, -1 when not known ahead.
	total() int
}

// generated is --count messages made from the flags.
type generated struct {
	f     *produceFlags
	tmpl  pool.Message
	fixed []byte
	i     int
}

func (g *generated) next(context.Context) (pool.Message, bool, error) {
	if g.i >= g.f.count {
		return pool.Message{}, false, nil
	}
	m := g.tmpl
	m.Payload = g.f.payloadFor(g.i, g.fixed)
	g.i++
	return m, true, nil
}

func (g *generated) total() int { return g.f.count }

// lineSource is --input: each non-blank line a message
// (msglines.Decoder: text, a key split off at --input-key-separator, or
// JSON as `consume --output json` prints it). The flags' key, ordering
// key and properties are every message's, unless its line says
// otherwise. At most limit lines when limit > 0 (--count given).
type lineSource struct {
	name  string
	r     io.Reader
	close func() error
	dec   msglines.Decoder
	limit int

	lines *msglines.Lines
	n     int // messages given
}

// openInput opens --input ("-": stdin). Its errors are usage errors.
func (f *produceFlags) openInput(tmpl pool.Message) (*lineSource, error) {
	src := &lineSource{name: f.input, close: func() error { return nil },
		dec: msglines.Decoder{JSON: f.inputFormat == "json", KeySeparator: f.keySep, Template: tmpl}}
	if f.countSet {
		src.limit = f.count
	}
	if f.input == "-" {
		src.name, src.r = "stdin", os.Stdin
		return src, nil
	}
	file, err := os.Open(f.input)
	if err != nil {
		return nil, usagef("--input: %v", err)
	}
	src.r, src.close = file, file.Close
	return src, nil
}

// start reads the lines until the end of the input or ctx
// (msglines.Read).
func (s *lineSource) start(ctx context.Context) {
	s.lines = msglines.Read(ctx, s.name, s.r)
}

func (s *lineSource) next(ctx context.Context) (pool.Message, bool, error) {
	if s.limit > 0 && s.n >= s.limit {
		return pool.Message{}, false, nil
	}
	l, ok, err := s.lines.Next(ctx)
	if !ok {
		return pool.Message{}, false, err
	}
	m, err := s.dec.Message(l.Text)
	if err != nil {
		return pool.Message{}, false, fmt.Errorf("line %d of %s: %w", l.N, s.name, err)
	}
	s.n++
	return m, true, nil
}

func (s *lineSource) total() int { return -1 }

// checkInput checks the --input flags. Its errors are usage errors.
func (f *produceFlags) checkInput(changed func(string) bool) error {
	if f.input == "" {
		for _, name := range []string{"input-format", "input-key-separator"} {
			if changed(name) {
				return usagef("--%s is for --input", name)
			}
		}
		return nil
	}
	switch {
	case changed("message") || changed("size"):
		return usagef("--input excludes --message and --size: each line is a message")
	case f.inputFormat != "text" && f.inputFormat != "json":
		return usagef("--input-format %q: want text or json", f.inputFormat)
	case f.inputFormat == "json" && f.keySep != "":
		return usagef("--input-key-separator is for --input-format text: a JSON line has its key")
	}
	return nil
}
