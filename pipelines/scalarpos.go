package pipelines

import (
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// scalarPos is the line and column in src of the character offset
// characters into scalar n's value: where a problem inside an expression
// is. The parser gives a scalar's start only, and a value is not its
// text in the file (quotes and escapes, a block scalar's indentation,
// folded lines), so the value is matched against the text from there, a
// character at a time: spaces and line breaks may stand for one another
// and indentation is skipped; quotes and escapes are stepped over.
// false when the value does not match the text (a ${VAR} expanded in
// it, an escape standing for another character): the caller then points
// at the scalar's start.
func scalarPos(src []byte, n *yaml.Node, offset int) (line, col int, ok bool) {
	i, line, col := startOf(src, n)
	if i < 0 {
		return 0, 0, false
	}
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	block := n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if quoted {
		i, col = i+1, col+1 // the opening quote
	}
	if block {
		// The content starts on the line after the indicator.
		for i < len(src) && src[i] != '\n' {
			i++
		}
	}
	advance := func() {
		r, size := utf8.DecodeRune(src[i:])
		i += size
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	k := 0
	for _, want := range n.Value {
		for {
			if i >= len(src) {
				return 0, 0, false
			}
			got, _ := utf8.DecodeRune(src[i:])
			space := func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '\r' }
			switch {
			case got == want, space(got) && space(want):
				if k == offset {
					return line, col, true
				}
				advance()
				k++
			case space(got):
				advance() // indentation, or a folded line's break
				continue
			case quoted && got == '\\' && n.Style&yaml.DoubleQuotedStyle != 0:
				advance() // an escape: the next character is the value's
				continue
			case quoted && got == '\'' && n.Style&yaml.SingleQuotedStyle != 0:
				advance() // '' is '
				continue
			default:
				return 0, 0, false
			}
			break
		}
	}
	if k == offset {
		return line, col, true // just past the value
	}
	return 0, 0, false
}

// startOf is the byte index in src of n's line and column, with them.
func startOf(src []byte, n *yaml.Node) (i, line, col int) {
	line, col = 1, 1
	for i = 0; i < len(src); {
		if line == n.Line && col == n.Column {
			return i, line, col
		}
		r, size := utf8.DecodeRune(src[i:])
		i += size
		if r == '\n' {
			if line == n.Line {
				return -1, 0, 0
			}
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return -1, 0, 0
}
