package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
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

// lineSource is --input: each non-empty line a message, as text (the
// payload, a key split off at --input-key-separator) or as JSON (an
// object as `consume --output json` prints one). The flags' key,
// ordering key and properties are every message's, unless its line says
// otherwise. At most limit lines when limit > 0 (--count given).
type lineSource struct {
	name  string
	r     io.Reader
	close func() error
	tmpl  pool.Message
	json  bool
	sep   string
	limit int

	lines chan inputLine
	errc  chan error
	n     int // messages given
}

// inputLine is a non-empty line of the input and its number.
type inputLine struct {
	n    int
	text []byte
}

// maxInputLine is the longest line read: a message the brokers take.
const maxInputLine = pulsarwire.DefaultMaxMessageSize

// openInput opens --input ("-": stdin). Its errors are usage errors.
func (f *produceFlags) openInput(tmpl pool.Message) (*lineSource, error) {
	src := &lineSource{name: f.input, tmpl: tmpl, json: f.inputFormat == "json", sep: f.keySep, close: func() error { return nil }}
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

// start reads the lines on a goroutine of its own, so that an input that
// blocks (a terminal on stdin) does not hold up an interrupt: the
// goroutine ends at the end of the input, or at its next line once ctx
// ended.
func (s *lineSource) start(ctx context.Context) {
	s.lines, s.errc = make(chan inputLine), make(chan error, 1)
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(s.r)
		sc.Buffer(make([]byte, 64*1024), maxInputLine)
		n := 0
		for sc.Scan() {
			n++
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			select {
			case s.lines <- inputLine{n, bytes.Clone(sc.Bytes())}:
			case <-ctx.Done():
				s.errc <- nil
				return
			}
		}
		if err := sc.Err(); err != nil {
			s.errc <- fmt.Errorf("read %s (line %d): %w", s.name, n+1, err)
			return
		}
		s.errc <- nil
	}()
}

func (s *lineSource) next(ctx context.Context) (pool.Message, bool, error) {
	if s.limit > 0 && s.n >= s.limit {
		return pool.Message{}, false, nil
	}
	select {
	case <-ctx.Done():
		return pool.Message{}, false, nil
	case l, ok := <-s.lines:
		if !ok {
			return pool.Message{}, false, <-s.errc
		}
		m, err := s.message(l)
		if err != nil {
			return pool.Message{}, false, fmt.Errorf("line %d of %s: %w", l.n, s.name, err)
		}
		s.n++
		return m, true, nil
	}
}

func (s *lineSource) total() int { return -1 }

// message is line l as a message.
func (s *lineSource) message(l inputLine) (pool.Message, error) {
	m := s.tmpl
	if !s.json {
		m.Payload = l.text
		if s.sep != "" {
			if k, v, ok := bytes.Cut(l.text, []byte(s.sep)); ok {
				m.Key, m.Payload = string(k), v
			}
		}
		return m, nil
	}
	var jm jsonMessage
	dec := json.NewDecoder(bytes.NewReader(l.text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jm); err != nil {
		return m, fmt.Errorf("want an object as consume --output json prints: %w", err)
	}
	if dec.More() {
		return m, fmt.Errorf("want one JSON object on the line, got more")
	}
	switch {
	case jm.Payload != nil && jm.PayloadBase64 != nil:
		return m, fmt.Errorf("payload and payload_base64 exclude each other")
	case jm.Payload != nil:
		m.Payload = []byte(*jm.Payload)
	default:
		m.Payload = jm.PayloadBase64
	}
	if jm.Key != "" {
		m.Key = jm.Key
	}
	if jm.OrderingKey != "" {
		m.OrderingKey = jm.OrderingKey
	}
	if len(jm.Properties) > 0 {
		props := maps.Clone(s.tmpl.Properties)
		if props == nil {
			props = map[string]string{}
		}
		maps.Copy(props, jm.Properties)
		m.Properties = props
	}
	if jm.EventTime != nil {
		m.EventTime = *jm.EventTime
	}
	return m, nil
}

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
