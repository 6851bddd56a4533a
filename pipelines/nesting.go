package pipelines

import (
	"bytes"
	"fmt"
	"regexp"
	"unicode/utf8"
)

// blockScalar matches a line whose value is a block scalar (| or >), so
// that the more indented lines after it are text, not structure.
var blockScalar = regexp.MustCompile(`(^|:\s|-\s)\s*[|>][-+0-9]*\s*(#.*)?$`)

// checkNesting refuses a file nested far deeper than MaxDepth before the
// YAML parser reads it: the parser accepts 10 000 levels and spends
// seconds on a megabyte of them. It reads the text roughly (indentation,
// "- " entries, flow brackets, quotes and comments), so it may count a
// level too many in odd places (a block scalar's own indentation) and it
// stops only at twice the limit; the decoder enforces MaxDepth exactly.
func checkNesting(name string, data []byte) *Error {
	s := nestingScan{name: name, limit: 2 * MaxDepth, block: -1}
	for i, text := range bytes.Split(data, []byte("\n")) {
		s.line, s.text = i+1, text
		if s.inBlockScalar() {
			continue
		}
		pos := 0
		if s.flow == 0 && s.quote == 0 {
			var e *Error
			if pos, e = s.indentation(); e != nil {
				return e
			}
		}
		if e := s.tokens(pos); e != nil {
			return e
		}
	}
	return nil
}

// nestingScan is what checkNesting knows between lines, and the line it
// is reading.
type nestingScan struct {
	name    string
	limit   int
	indents []int  // block indentation columns, innermost last
	flow    int    // open [ and {
	quote   byte   // the quote of a quoted scalar still open, or 0
	block   int    // the indentation of the line a block scalar follows, or -1
	line    int    // 1-based number of text
	text    []byte // the line being read
}

// inBlockScalar reports whether the line is a block scalar's text (blank
// or indented past the line the scalar follows); the first line that is
// not ends the block scalar.
func (s *nestingScan) inBlockScalar() bool {
	if s.block < 0 {
		return false
	}
	if len(bytes.TrimSpace(s.text)) == 0 || leadingSpaces(s.text) > s.block {
		return true
	}
	s.block = -1
	return false
}

// deeper is the error for nesting past the limit, at column col of the
// line, or nil while within it.
func (s *nestingScan) deeper(col int) *Error {
	if len(s.indents)+s.flow <= s.limit {
		return nil
	}
	return &Error{File: s.name, Line: s.line, Col: utf8.RuneCount(s.text[:col]) + 1,
		Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
}

// indentation reads a line outside flow collections and quotes: a line
// with content closes the block levels indented as far as it or further
// and opens its own, and each "- " entry on it opens one more ("- - - x"
// nests a list in a list on one line). It returns where the content after
// the indentation and entries begins.
func (s *nestingScan) indentation() (int, *Error) {
	text := s.text
	pos := leadingSpaces(text)
	rest := bytes.TrimSpace(text[pos:])
	if len(rest) == 0 || rest[0] == '#' {
		return pos, nil
	}
	for len(s.indents) > 0 && s.indents[len(s.indents)-1] >= pos {
		s.indents = s.indents[:len(s.indents)-1]
	}
	s.indents = append(s.indents, pos)
	for pos+1 < len(text) && text[pos] == '-' && text[pos+1] == ' ' {
		pos += 2
		for pos < len(text) && text[pos] == ' ' {
			pos++
		}
		s.indents = append(s.indents, pos)
		if e := s.deeper(pos); e != nil {
			return pos, e
		}
	}
	if e := s.deeper(pos); e != nil {
		return pos, e
	}
	if blockScalar.Match(rest) {
		s.block = leadingSpaces(text)
	}
	return pos, nil
}

// tokens reads the line from pos for flow brackets, which open and close
// levels where a value may begin, outside quoted scalars and comments.
func (s *nestingScan) tokens(pos int) *Error {
	text := s.text
	for j := pos; j < len(text); j++ {
		c := text[j]
		switch {
		case s.quote != 0:
			j = s.quoted(j)
		case startsComment(text, j):
			j = len(text)
		case !startsValue(text, j, s.flow > 0):
		case c == '"' || c == '\'':
			s.quote = c
		case c == '[' || c == '{':
			s.flow++
			if e := s.deeper(j); e != nil {
				return e
			}
		}
		if s.quote == 0 && s.flow > 0 && (c == ']' || c == '}') {
			s.flow--
		}
	}
	return nil
}

// quoted reads text[j] inside a quoted scalar: its own quote closes it,
// and in a double-quoted one a backslash escapes the next byte. It
// returns the last index read.
func (s *nestingScan) quoted(j int) int {
	switch c := s.text[j]; {
	case c == s.quote:
		s.quote = 0
	case c == '\\' && s.quote == '"':
		j++
	}
	return j
}

// startsComment reports whether text[j] is a '#' that begins a comment:
// first on the line or after white space ("a#b" is a scalar).
func startsComment(text []byte, j int) bool {
	return text[j] == '#' && (j == 0 || text[j-1] == ' ' || text[j-1] == '\t')
}

// leadingSpaces is how many spaces text begins with.
func leadingSpaces(text []byte) int { return len(text) - len(bytes.TrimLeft(text, " ")) }

// startsValue reports whether text[j] is where a value may begin: first
// on its line, or after ": ", "- ", "? ", or (in a flow collection) after
// '[', '{', ',' or ':'. Elsewhere '[' and quotes are part of a plain
// scalar ("orders-[a-z]+", "it's").
func startsValue(text []byte, j int, inFlow bool) bool {
	k := j - 1
	for k >= 0 && (text[k] == ' ' || text[k] == '\t') {
		k--
	}
	if k < 0 {
		return true
	}
	spaced := k < j-1
	switch text[k] {
	case '[', '{', ',':
		return inFlow
	case ':':
		return spaced || inFlow
	case '-', '?':
		return spaced && (k == 0 || text[k-1] == ' ')
	}
	return false
}
