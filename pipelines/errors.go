package pipelines

import (
	"fmt"
	"strings"
)

// Error is one problem with a pipeline file, at the place it was found.
// It reads "FILE:LINE:COL: field.path: what is wrong", the form editors
// and compilers use, so a terminal or editor can jump to it.
type Error struct {
	File string // as given to Load or Parse
	Line int    // 1-based
	Col  int    // 1-based, in characters (runes)
	// Path names the field the way the file spells it
	// ("pipelines[0].source.topics[1]"); "" for a problem of the file as a
	// whole (syntax, encoding, size).
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in the order of their place
// in it. errors.As finds each *Error in it.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives each *Error to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// err is es as an error: nil when empty, the *Error itself when one.
func (es Errors) err() error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return es
}
