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
	limit := 2 * MaxDepth
	var indents []int // block indentation columns, innermost last
	flow := 0         // open [ and {
	var quote byte    // the quote of a quoted scalar still open, or 0
	block := -1       // the indentation of the line a block scalar follows, or -1
	for i, text := range bytes.Split(data, []byte("\n")) {
		if block >= 0 {
			indent := len(text) - len(bytes.TrimLeft(text, " "))
			if len(bytes.TrimSpace(text)) == 0 || indent > block {
				continue // the block scalar's text
			}
			block = -1
		}
		deeper := func(col int) *Error {
			if len(indents)+flow <= limit {
				return nil
			}
			return &Error{File: name, Line: i + 1, Col: utf8.RuneCount(text[:col]) + 1,
				Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		}
		pos := 0
		if flow == 0 && quote == 0 {
			pos = len(text) - len(bytes.TrimLeft(text, " "))
			rest := bytes.TrimSpace(text[pos:])
			if len(rest) > 0 && rest[0] != '#' {
				for len(indents) > 0 && indents[len(indents)-1] >= pos {
					indents = indents[:len(indents)-1]
				}
				indents = append(indents, pos)
				// "- - - x" nests a list in a list on one line.
				for pos+1 < len(text) && text[pos] == '-' && text[pos+1] == ' ' {
					pos += 2
					for pos < len(text) && text[pos] == ' ' {
						pos++
					}
					indents = append(indents, pos)
					if e := deeper(pos); e != nil {
						return e
					}
				}
				if e := deeper(pos); e != nil {
					return e
				}
				if blockScalar.Match(rest) {
					block = len(text) - len(bytes.TrimLeft(text, " "))
				}
			}
		}
		for j := pos; j < len(text); j++ {
			c := text[j]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				} else if c == '\\' && quote == '"' {
					j++
				}
			case c == '#' && (j == 0 || text[j-1] == ' ' || text[j-1] == '\t'):
				j = len(text) // a comment
			case !startsValue(text, j, flow > 0):
			case c == '"' || c == '\'':
				quote = c
			case c == '[' || c == '{':
				flow++
				if e := deeper(j); e != nil {
					return e
				}
			}
			if quote == 0 && flow > 0 && (c == ']' || c == '}') {
				flow--
			}
		}
	}
	return nil
}

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
