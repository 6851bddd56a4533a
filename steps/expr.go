package steps

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Want is what an expression must give.
type Want uint8

const (
	// WantBool: a bool (filter, dead_letter_if).
	WantBool Want = iota + 1
	// WantString: a string (a key, a property, a topic, a reason).
	WantString
	// WantPayload: bytes, a string (its UTF-8 bytes), or a map or list
	// (encoded as JSON).
	WantPayload
	// WantTime: a timestamp, or an int of milliseconds since the epoch.
	WantTime
)

func (w Want) String() string {
	switch w {
	case WantBool:
		return "a bool"
	case WantString:
		return "a string"
	case WantPayload:
		return "bytes, a string, a map or a list"
	case WantTime:
		return "a timestamp or an int (milliseconds since the epoch)"
	}
	return "a value"
}

// accepts reports whether an expression of type t can give what w wants
// (dyn can: it is checked at run time).
func (w Want) accepts(t *cel.Type) bool {
	k := t.Kind()
	if k == types.DynKind || k == types.AnyKind || k == types.ErrorKind {
		return true
	}
	switch w {
	case WantBool:
		return k == types.BoolKind
	case WantString:
		return k == types.StringKind
	case WantPayload:
		return k == types.BytesKind || k == types.StringKind || k == types.MapKind || k == types.ListKind
	case WantTime:
		return k == types.TimestampKind || k == types.IntKind
	}
	return false
}

// Problem is one thing wrong with an expression, at Offset: a count of
// characters (Unicode code points) from the expression's start.
type Problem struct {
	Offset int
	Msg    string
}

// CompileError is every problem of one expression.
type CompileError struct {
	Problems []Problem
}

func (e *CompileError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = fmt.Sprintf("at %d: %s", p.Offset, p.Msg)
	}
	return strings.Join(msgs, "; ")
}

// Expr is a compiled expression: parsed, type-checked and planned once,
// evaluated for each message.
type Expr struct {
	src  string
	want Want
	// fast runs without CEL's run-time cost tracker: set when the
	// expression's estimated worst case, for messages within MaxSize, is
	// within the cost limit. tracked stops at the limit.
	fast, tracked cel.Program
	// Estimate is CEL's estimated worst-case cost for a message within
	// MaxSize.
	estimate uint64
	uses     uses // the variables it reads
}

// uses says which variables an expression reads, so that what it does
// not read is never made (a payload's text or JSON).
type uses struct{ text, json bool }

// Source is the expression as written.
func (x *Expr) Source() string { return x.src }

// Bounded reports whether the expression's worst case is within the cost
// limit for every message within MaxSize, so that such messages are
// evaluated without the run-time cost tracker; Estimate is that worst
// case.
func (x *Expr) Bounded() bool { return x.fast != nil }

// Estimate is CEL's estimate of the expression's worst-case cost for a
// message within MaxSize.
func (x *Expr) Estimate() uint64 { return x.estimate }

// Compile parses and type-checks src, which must give what want says.
// The error is a *CompileError whose problems are placed in src.
func (e *Env) Compile(src string, want Want) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &CompileError{[]Problem{{0, "empty expression"}}}
	}
	source := common.NewTextSource(src)
	ast, iss := e.cel.CompileSource(source)
	if iss != nil && iss.Err() != nil {
		var ps []Problem
		for _, ce := range iss.Errors() {
			off := 0
			if loc := ce.Location; loc != nil && loc.Line() > 0 {
				if o, ok := source.LocationOffset(loc); ok {
					off = int(o)
				}
			}
			ps = append(ps, Problem{off, ce.Message})
		}
		return nil, &CompileError{ps}
	}
	if t := ast.OutputType(); !want.accepts(t) {
		return nil, &CompileError{[]Problem{{0, fmt.Sprintf("gives %s, want %s", typeName(t), want)}}}
	}
	x := &Expr{src: src, want: want}
	for _, r := range ast.NativeRep().ReferenceMap() {
		switch r.Name {
		case VarText:
			x.uses.text = true
		case VarJSON:
			x.uses.json = true
		}
	}
	var err error
	x.tracked, err = e.cel.Program(ast, cel.CostLimit(e.opts.CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &CompileError{[]Problem{{0, err.Error()}}}
	}
	est, err := e.cel.EstimateCost(ast, sizes{max: uint64(e.opts.MaxSize)})
	if err == nil {
		x.estimate = est.Max
		if est.Max <= e.opts.CostLimit {
			if x.fast, err = e.cel.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
				return nil, &CompileError{[]Problem{{0, err.Error()}}}
			}
		}
	}
	return x, nil
}

func typeName(t *cel.Type) string {
	switch t.Kind() {
	case types.IntKind:
		return "an int"
	case types.UintKind:
		return "a uint"
	case types.DoubleKind:
		return "a double"
	case types.NullTypeKind:
		return "null"
	}
	return "a " + t.String()
}

// eval evaluates x over a; small says that the message is within MaxSize.
func (x *Expr) eval(a *activation, small bool) (ref.Val, error) {
	prg := x.tracked
	if small && x.fast != nil {
		prg = x.fast
	}
	out, _, err := prg.Eval(a)
	if err != nil {
		return nil, err
	}
	return out, nil
}
